// Generation from prompts with media (issue #21) in every build (no media library: the media are synthetic
// patches and mel features, the samples laid out as veomni-preprocess multimodal lays them out): on the Qwen3-VL
// and Qwen3-Omni thinker toys, image and audio prompts batched with a text prompt generate through the KV cache the
// greedy ids and logits of a loop without cache over the whole multimodal forward (tests/common/
// generate_media_check.h); the media change what is generated.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "data/audio_length.h"
#include "data/constants.h"
#include "core/error.h"
#include "data/mrope_positions.h"
#include "generate/prompt_file.h"
#include "tests/common/generate_media_check.h"
#include "tests/common/scratch_dir.h"

using namespace veomni;

namespace {

constexpr int64_t kNewTokens = 5;
constexpr int64_t kPatchDim = 3 * 2 * 16 * 16;  // the toys' vision towers: 3 channels, temporal 2, patch 16
constexpr int64_t kMelBins = 128;

// [rows, width] of values in [-1, 1) that vary with row and column.
Tensor synthetic_rows(int64_t rows, int64_t width, int64_t seed) {
  std::vector<float> values;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c)
      values.push_back(static_cast<float>(static_cast<double>((r * 131 + c * 31 + seed * 17) % 255) / 127.5 - 1.0));
  return Tensor::from_vector(values, {rows, width});
}

Tensor mask_of(const std::vector<int64_t>& ids, int64_t placeholder) {
  Tensor mask = Tensor::full<bool>({static_cast<int64_t>(ids.size())}, false);
  for (size_t i = 0; i < ids.size(); ++i) mask.data<bool>()[i] = ids[i] == placeholder;
  return mask;
}

// before, one media block (an image of `grid` patches, or an audio clip of `mel_frames` frames), after: the sample
// veomni-preprocess multimodal stores (positions on the placeholder ids, then the placeholders zeroed).
Sample synthetic_sample(bool omni, std::optional<VisionGrid> grid, int64_t mel_frames, std::vector<int64_t> before,
                        const std::vector<int64_t>& after, int64_t seed) {
  std::vector<int64_t> ids = std::move(before);
  if (grid) {
    ids.push_back(veomni::testing::kToyVisionStart);
    ids.insert(ids.end(), static_cast<size_t>(grid->patches() / 4), kImageInputIndex);
    ids.push_back(veomni::testing::kToyVisionEnd);
  } else {
    ids.push_back(veomni::testing::kToyAudioStart);
    ids.insert(ids.end(), static_cast<size_t>(audio_output_length(mel_frames)), kAudioInputIndex);
    ids.push_back(veomni::testing::kToyAudioEnd);
  }
  ids.insert(ids.end(), after.begin(), after.end());
  const auto n = static_cast<int64_t>(ids.size());
  Sample sample;
  if (omni) {
    Qwen3OmniMedia media;
    if (grid) media.images.push_back(*grid);
    else media.audio_feature_lengths.push_back(mel_frames);
    Qwen3OmniRopeOptions options;
    options.vision_start_token_id = veomni::testing::kToyVisionStart;
    options.audio_start_token_id = veomni::testing::kToyAudioStart;
    sample["position_ids"] =
        Tensor::from_vector(qwen3_omni_rope_index(ids, media, with_veomni_placeholders(options)).position_ids, {3, n});
    sample["audio_mask"] = mask_of(ids, kAudioInputIndex);
    sample["input_features"] = synthetic_rows(grid ? 0 : mel_frames, kMelBins, seed);
    sample["audio_feature_lengths"] =
        grid ? Tensor::empty({0}, DType::I64) : Tensor::from_vector(std::vector<int64_t>{mel_frames}, {1});
  } else {
    Qwen3VlMedia media;
    if (grid) media.images.push_back(*grid);
    sample["position_ids"] = Tensor::from_vector(
        qwen3_vl_rope_index(ids, media, with_veomni_placeholders(Qwen3VlRopeOptions{})).position_ids, {3, n});
  }
  sample["image_mask"] = mask_of(ids, kImageInputIndex);
  sample["video_mask"] = mask_of(ids, kVideoInputIndex);
  sample["pixel_values"] = synthetic_rows(grid ? grid->patches() : 0, kPatchDim, seed);
  sample["image_grid_thw"] = grid ? Tensor::from_vector(std::vector<int64_t>{grid->t, grid->h, grid->w}, {1, 3})
                                  : Tensor::empty({0, 3}, DType::I64);
  for (int64_t& id : ids)
    if (id < 0) id = 0;
  sample["input_ids"] = Tensor::from_vector(ids, {n});
  return sample;
}

class GenerateMedia : public veomni::testing::ScratchDir {};

TEST_F(GenerateMedia, Qwen3VlImagePromptsMatchNoCacheLoop) {
  const std::vector<std::optional<Sample>> samples = {
      synthetic_sample(false, VisionGrid{1, 4, 4}, 0, {5, 17, 30}, {92, 6}, 1), std::nullopt,
      synthetic_sample(false, VisionGrid{1, 2, 6}, 0, {44}, {7, 8, 9, 10, 11, 12, 13}, 2)};
  veomni::testing::expect_cached_generation_matches_full_forward("qwen3_vl_toy", path("model"), samples,
                                                                 {{}, {3, 14, 15, 92, 6, 71, 82}, {}}, kNewTokens);
}

TEST_F(GenerateMedia, Qwen3VlMoeImagePromptMatchesNoCacheLoop) {
  const std::vector<std::optional<Sample>> samples = {
      std::nullopt, synthetic_sample(false, VisionGrid{1, 4, 4}, 0, {5, 17}, {92, 6, 8}, 3)};
  veomni::testing::expect_cached_generation_matches_full_forward("qwen3_vl_moe_toy", path("model"), samples,
                                                                 {{3, 14, 15, 92}, {}}, kNewTokens);
}

TEST_F(GenerateMedia, Qwen3OmniThinkerImageAndAudioPromptsMatchNoCacheLoop) {
  const std::vector<std::optional<Sample>> samples = {
      synthetic_sample(true, std::nullopt, 160, {5, 17}, {92, 6, 8}, 4), std::nullopt,
      synthetic_sample(true, VisionGrid{1, 4, 4}, 0, {44, 45, 46}, {7}, 5)};
  veomni::testing::expect_cached_generation_matches_full_forward("qwen3_omni_moe_toy", path("model"), samples,
                                                                 {{}, {3, 14, 15}, {}}, kNewTokens);
}

// The media reach the logits: the same image prompt with other pixels (or as plain ids) generates otherwise.
TEST_F(GenerateMedia, PixelsChangeTheFirstLogits) {
  const std::string dir = path("model");
  veomni::testing::make_toy_hf_directory("qwen3_vl_toy", dir);
  GenerationModel loaded = load_generation_model(dir, Device::cpu());
  load_media_encoders(loaded);
  auto first_logits = [&](int64_t seed) {
    const Sample sample = synthetic_sample(false, VisionGrid{1, 4, 4}, 0, {5, 17, 30}, {92, 6}, seed);
    GenerateOptions options;
    options.max_new_tokens = 1;
    options.mrope_positions = true;
    Generator generator(*loaded.model, options);
    generator.set_prefill_builder(MultimodalPrefill(loaded.multimodal->body(), {sample}));
    std::vector<float> logits;
    generator.set_logits_observer([&](const std::vector<int64_t>&, const Tensor& l) {
      logits.assign(l.data<float>(), l.data<float>() + l.numel());
    });
    generator.generate({sample_prompt_ids(sample, "prompt")}, 0);
    return logits;
  };
  const std::vector<float> a = first_logits(1), b = first_logits(2);
  ASSERT_EQ(a.size(), b.size());
  float largest = 0;
  for (size_t v = 0; v < a.size(); ++v) largest = std::max(largest, std::abs(a[v] - b[v]));
  EXPECT_GT(largest, 1e-3f);
}

// A text model has no media encoders; a prompt file's records know their media and where their paths resolve.
TEST_F(GenerateMedia, TextModelHasNoEncodersAndRecordsKnowTheirMediaDirectory) {
  GenerationModel text = load_generation_model(std::string(VEOMNI_FIXTURES_DIR) + "/hf/qwen3_toy/model", Device::cpu());
  EXPECT_THROW(load_media_encoders(text), InputError);
  std::filesystem::create_directories(path("p"));
  std::ofstream(path("p/prompts.jsonl"))
      << R"({"messages": [{"role": "user", "content": "hi"}]})" << "\n"
      << R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}]})" << "\n"
      << R"({"messages": [{"role": "user", "content": [{"type": "audio", "audio": "a.wav"}]}]})" << "\n"
      << R"({"input_ids": [1, 2]})" << "\n";
  const std::vector<PromptRecord> records = read_prompt_file(path("p/prompts.jsonl"));
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(std::vector<bool>({records[0].has_media(), records[1].has_media(), records[2].has_media(),
                               records[3].has_media()}),
            std::vector<bool>({false, false, true, false}));
  EXPECT_EQ(records[2].media_dir, path("p"));
}

}  // namespace
