// Test support: one sample of a Qwen3-VL / Qwen3-Omni dataset (HDF5) as the inputs.safetensors of a thinker fixture,
// with its token ids moved into the fixture config's small vocabulary (see tests/fixtures/thinker/make_inputs.sh).
//
// Usage: export_multimodal_batch DATASET.h5 SAMPLE_INDEX SOURCE_CONFIG FIXTURE_CONFIG OUT.safetensors
//   SOURCE_CONFIG   the config.json whose token ids the dataset uses (configs/model_configs/<toy>/config.json)
//   FIXTURE_CONFIG  the fixture's config.json (cut vocabulary, special ids at its top)
//
// Id remapping (deterministic, the same for input ids and labels): an id equal to one of the source config's
// special token ids (vision_start/end, audio_start/end, image/video/audio pad) becomes the fixture config's id of the
// same key; every other id becomes id mod M, M = the smallest special id of the fixture config, so text never
// collides with a placeholder. kIgnoreIndex labels stay.
//
// Written tensors: input_ids i64 [S] (media rows zeroed, as datasets store them), hf_input_ids i64 [S] (the fixture's
// image / video / audio placeholder ids at the media rows, what transformers reads), target_ids i64 [S] (labels
// shifted left, the last -100), position_ids [3, S] as stored (i64, or f32 for Qwen3-Omni), image_mask /
// video_mask / audio_mask bool [S], and where present pixel_values, image_grid_thw, pixel_values_videos,
// video_grid_thw, input_features [frames, mel], audio_feature_lengths. Metadata: source dataset and sample index.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/tool.h"
#include "data/batch.h"
#include "data/dataset_reader.h"
#include "io/json_file.h"
#include "io/safetensors.h"

namespace {

using nlohmann::json;
using veomni::Tensor;

constexpr const char* kTool = "export_multimodal_batch";
const char* const kSpecialKeys[] = {"vision_start_token_id", "vision_end_token_id", "audio_start_token_id",
                                    "audio_end_token_id",    "image_token_id",      "video_token_id",
                                    "audio_token_id"};

// Qwen3-Omni keeps the token ids in thinker_config, Qwen3-VL at the top level.
const json& token_holder(const json& config) {
  return config.contains("thinker_config") ? config.at("thinker_config") : config;
}

std::map<std::string, int64_t> special_ids(const json& config) {
  std::map<std::string, int64_t> ids;
  const json& holder = token_holder(config);
  for (const char* key : kSpecialKeys)
    if (holder.contains(key) && holder.at(key).is_number_integer()) ids[key] = holder.at(key).get<int64_t>();
  return ids;
}

class IdRemap {
 public:
  IdRemap(const json& source, const json& fixture, const std::string& fixture_path) {
    const auto from = special_ids(source), to = special_ids(fixture);
    VEOMNI_INPUT_CHECK(!to.empty(), "{}: no special token ids", fixture_path);
    modulus_ = INT64_MAX;
    for (const auto& [key, id] : to) modulus_ = std::min(modulus_, id);
    VEOMNI_INPUT_CHECK(modulus_ > 1, "{}: special ids must sit at the top of the vocabulary", fixture_path);
    for (const auto& [key, id] : from)
      if (to.count(key)) specials_[id] = to.at(key);
    placeholder_ = to;
  }
  int64_t operator()(int64_t id) const {
    if (id == veomni::kIgnoreIndex) return id;
    VEOMNI_INPUT_CHECK(id >= 0, "token id {} is negative (not the ignore index)", id);
    const auto it = specials_.find(id);
    return it != specials_.end() ? it->second : id % modulus_;
  }
  int64_t placeholder(const std::string& key) const {
    const auto it = placeholder_.find(key);
    VEOMNI_INPUT_CHECK(it != placeholder_.end(), "the fixture config has no {}", key);
    return it->second;
  }

 private:
  int64_t modulus_;
  std::map<int64_t, int64_t> specials_;
  std::map<std::string, int64_t> placeholder_;
};

bool mask_at(const Tensor& mask, int64_t i) { return static_cast<const uint8_t*>(mask.raw_data())[i] != 0; }

int run(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr,
                 "usage: %s DATASET.h5 SAMPLE_INDEX SOURCE_CONFIG.json FIXTURE_CONFIG.json OUT.safetensors\n", kTool);
    return 2;
  }
  const std::string dataset = argv[1], source_path = argv[3], fixture_path = argv[4], out = argv[5];
  const int64_t index = std::stoll(argv[2]);
  const IdRemap remap(veomni::read_json_file(source_path), veomni::read_json_file(fixture_path), fixture_path);

  veomni::DatasetReader reader(dataset);
  VEOMNI_INPUT_CHECK(index >= 0 && index < reader.num_samples(), "{}: sample {} out of range (0..{})", dataset, index,
                     reader.num_samples() - 1);
  const veomni::Sample sample = reader.read(index);
  const std::string context = dataset + " sample " + std::to_string(index);
  // Copies (shared handles), not references: GCC 13 cannot see that sample_key returns into `sample`.
  const Tensor stored_ids = veomni::sample_key(sample, "input_ids", context);
  const Tensor labels = veomni::sample_key(sample, "labels", context);
  const int64_t s = stored_ids.numel();

  std::vector<std::pair<std::string, Tensor>> tensors;
  std::vector<int64_t> ids(static_cast<size_t>(s)), hf_ids(static_cast<size_t>(s)), targets(static_cast<size_t>(s));
  for (int64_t i = 0; i < s; ++i) ids[i] = hf_ids[i] = remap(stored_ids.data<int64_t>()[i]);
  for (int64_t i = 0; i + 1 < s; ++i) targets[i] = remap(labels.data<int64_t>()[i + 1]);
  targets[s - 1] = veomni::kIgnoreIndex;
  const std::pair<const char*, const char*> masks[] = {
      {"image_mask", "image_token_id"}, {"video_mask", "video_token_id"}, {"audio_mask", "audio_token_id"}};
  std::vector<std::pair<std::string, Tensor>> mask_tensors;
  for (const auto& [mask_key, token_key] : masks) {
    if (!sample.count(mask_key)) continue;
    const Tensor mask = sample.at(mask_key).to_dtype(veomni::DType::Bool);
    VEOMNI_INPUT_CHECK(mask.numel() == s, "{}: {} has {} entries for {} tokens", context, mask_key, mask.numel(), s);
    for (int64_t i = 0; i < s; ++i)
      if (mask_at(mask, i)) {
        ids[i] = 0;
        hf_ids[i] = remap.placeholder(token_key);
      }
    mask_tensors.emplace_back(mask_key, mask);
  }
  tensors.emplace_back("input_ids", Tensor::from_vector(ids, {s}));
  tensors.emplace_back("hf_input_ids", Tensor::from_vector(hf_ids, {s}));
  tensors.emplace_back("target_ids", Tensor::from_vector(targets, {s}));
  tensors.emplace_back("position_ids", veomni::sample_key(sample, "position_ids", context));
  for (auto& m : mask_tensors) tensors.push_back(std::move(m));
  for (const char* key : {"pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw", "input_features",
                          "audio_feature_lengths"})
    if (sample.count(key) && sample.at(key).numel() > 0) tensors.emplace_back(key, sample.at(key));
  veomni::write_safetensors(out, tensors, {{"dataset", std::filesystem::path(dataset).filename().string()}, {"sample_index", std::to_string(index)}});
  std::printf("%s: %lld tokens from %s\n", out.c_str(), static_cast<long long>(s), context.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return veomni::run_tool(kTool, [&] { return run(argc, argv); });
}
