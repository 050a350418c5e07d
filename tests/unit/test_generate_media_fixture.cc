// veomni's KV-cache greedy decoding of prompts with images against transformers' generate on the Qwen3-VL toy of
// tests/fixtures/generate/qwen3_vl_toy: media_expected.json (made by scripts/make_generate_media_fixture.py) holds 3
// prompts (two with images of different grids, one text-only) and the new token ids transformers generated for each
// alone; here the 3 decode in one batch. The pixel values are the formula the script uses, not stored.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/mrope_positions.h"
#include "generate/generation_model.h"
#include "generate/generator.h"
#include "generate/media_prompt.h"
#include "io/json_file.h"

using namespace veomni;

namespace {

// The script's pixel values of one prompt: [rows, width], element (r, c) = ((r * 131 + c * 31) % 255) / 127.5 - 1.
Tensor formula_pixels(int64_t rows, int64_t width) {
  std::vector<float> values;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c)
      values.push_back(static_cast<float>(static_cast<double>((r * 131 + c * 31) % 255) / 127.5 - 1.0));
  return Tensor::from_vector(values, {rows, width});
}

// One fixture prompt as the sample veomni-preprocess multimodal would store: image ids zeroed under the image mask,
// positions from the image grids.
Sample fixture_sample(const nlohmann::json& prompt, const nlohmann::json& fixture, const VisionConfig& vision) {
  const auto ids = prompt["input_ids"].get<std::vector<int64_t>>();
  const auto n = static_cast<int64_t>(ids.size());
  const int64_t image_token = fixture["image_token_id"].get<int64_t>();
  Qwen3VlMedia media;
  std::vector<int64_t> grid_values;
  int64_t patches = 0;
  for (const auto& g : prompt["image_grid_thw"]) {
    const VisionGrid grid{g[0].get<int64_t>(), g[1].get<int64_t>(), g[2].get<int64_t>()};
    media.images.push_back(grid);
    grid_values.insert(grid_values.end(), {grid.t, grid.h, grid.w});
    patches += grid.patches();
  }
  Qwen3VlRopeOptions options;
  options.image_token_id = image_token;
  options.video_token_id = fixture["video_token_id"].get<int64_t>();
  options.spatial_merge_size = vision.spatial_merge_size;
  const MropePositions<int64_t> positions = qwen3_vl_rope_index(ids, media, options);
  Sample sample;
  std::vector<int64_t> zeroed = ids;
  Tensor mask = Tensor::full<bool>({n}, false);
  for (int64_t i = 0; i < n; ++i) {
    if (ids[static_cast<size_t>(i)] != image_token) continue;
    zeroed[static_cast<size_t>(i)] = 0;
    mask.data<bool>()[i] = true;
  }
  sample["input_ids"] = Tensor::from_vector(zeroed, {n});
  sample["position_ids"] = Tensor::from_vector(positions.position_ids, {3, n});
  sample["image_mask"] = mask;
  sample["pixel_values"] = formula_pixels(patches, vision.patch_dim());
  sample["image_grid_thw"] = Tensor::from_vector(grid_values, {static_cast<int64_t>(media.images.size()), 3});
  return sample;
}

TEST(GenerateMediaFixture, VlImageGreedyIdsMatchTransformers) {
  const std::string dir = std::string(VEOMNI_FIXTURES_DIR) + "/generate/qwen3_vl_toy";
  const std::string path = dir + "/media_expected.json";
  ASSERT_TRUE(std::filesystem::exists(path))
      << path << " is absent: make it with scripts/make_generate_media_fixture.py (torch + transformers)";
  const nlohmann::json fixture = read_json_file(path);
  GenerationModel loaded = load_generation_model(dir + "/model", Device::cpu());
  load_media_encoders(loaded);
  ASSERT_TRUE(loaded.multimodal != nullptr);
  const VisionConfig& vision = loaded.multimodal->config().vision;
  std::vector<std::optional<Sample>> samples;
  std::vector<std::vector<int64_t>> prompts;
  for (const auto& prompt : fixture["prompts"]) {
    if (prompt["image_grid_thw"].empty()) samples.emplace_back();
    else samples.emplace_back(fixture_sample(prompt, fixture, vision));
    prompts.push_back(samples.back() ? sample_prompt_ids(*samples.back(), path)
                                     : prompt["input_ids"].get<std::vector<int64_t>>());
  }
  GenerateOptions options;
  options.max_new_tokens = fixture["max_new_tokens"].get<int64_t>();
  options.stop_token_ids = loaded.eos_token_ids;
  options.mrope_positions = true;
  Generator generator(*loaded.model, options);
  generator.set_prefill_builder(MultimodalPrefill(loaded.multimodal->body(), samples));
  const std::vector<Generation> got = generator.generate(prompts, 0);
  const auto want = fixture["expected"].get<std::vector<std::vector<int64_t>>>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i].token_ids, want[i]) << "prompt " << i;
}

}  // namespace
