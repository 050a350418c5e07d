// Test support: our fp32 CPU logits of a veomni-ckpt-merge output (Qwen3-VL / Qwen3-Omni thinker) for one dataset
// sample, with the inputs transformers needs to recompute them (run by tests/gpu/merged_omni_in_transformers.sh,
// checked by scripts/check_merged_thinker.py).
//
// Usage: merged_thinker_logits MERGED_DIR DATASET.h5 SAMPLE_INDEX OUT.safetensors
//   MERGED_DIR  what veomni-ckpt-merge wrote: config.json (the whole HF config) and the safetensors weights, loaded
//               through our HF loader (per-expert or stacked experts) into MultimodalLM on the CPU in float32
//
// The sample goes through the trainer's own collator (collate_multimodal, one sample, no SP), so the model sees
// exactly what veomni-train feeds it. Written tensors: logits f32 [S, V]; input_ids i64 [S] (media rows zeroed, what
// we read); hf_input_ids i64 [S] (the config's image / video / audio token ids at the media rows, what transformers
// reads); target_ids i64 [S] (shifted labels, -100 where nothing is predicted); position_ids [3, S] (f32 for
// Qwen3-Omni, i64 for Qwen3-VL: our stored M-RoPE positions, to be passed to transformers explicitly);
// image_mask / video_mask / audio_mask bool [S] where present; pixel_values, image_grid_thw i64 [n, 3],
// pixel_values_videos, video_grid_thw, input_features f32 [frames, mel] (clips one after another) and
// audio_feature_lengths i64 [clips] where present. Metadata: ce_loss (mean over the valid targets, our
// normalisation), valid_tokens, aux_loss (the load-balancing term, not in ce_loss), merged_dir, dataset,
// sample_index.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

#include "core/error.h"
#include "core/tool.h"
#include "data/batch.h"
#include "data/dataset_reader.h"
#include "data/multimodal_collator.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/hf_loader.h"
#include "model/thinker/multimodal_lm.h"
#include "model/thinker/thinker_config.h"
#include "model/weight_source.h"

namespace {

using nlohmann::json;
using veomni::Tensor;

constexpr const char* kTool = "merged_thinker_logits";

// Qwen3-Omni keeps the placeholder ids in thinker_config, Qwen3-VL at the top level.
int64_t placeholder_id(const json& config, const std::string& key, const std::string& config_path) {
  const json& holder = config.contains("thinker_config") ? config.at("thinker_config") : config;
  VEOMNI_INPUT_CHECK(holder.contains(key) && holder.at(key).is_number_integer(), "{}: no integer {}", config_path,
                     key);
  return holder.at(key).get<int64_t>();
}

Tensor grid_tensor(const std::vector<veomni::VisionGrid>& grids) {
  std::vector<int64_t> rows;
  for (const auto& g : grids) rows.insert(rows.end(), {g.t, g.h, g.w});
  return Tensor::from_vector(rows, {static_cast<int64_t>(grids.size()), 3});
}

// The ids transformers reads: ours with every media row set to its modality's placeholder token.
Tensor hf_input_ids(const veomni::MultimodalBatch& batch, const json& config, const std::string& config_path) {
  const int64_t s = batch.text.input_ids.numel();
  std::vector<int64_t> ids(batch.text.input_ids.data<int64_t>(), batch.text.input_ids.data<int64_t>() + s);
  const std::pair<const Tensor*, const char*> masks[] = {{&batch.image_mask, "image_token_id"},
                                                         {&batch.video_mask, "video_token_id"},
                                                         {&batch.audio_mask, "audio_token_id"}};
  for (const auto& [mask, key] : masks) {
    if (!mask->defined()) continue;
    const Tensor flags = mask->to_dtype(veomni::DType::Bool);
    const int64_t id = placeholder_id(config, key, config_path);
    for (int64_t i = 0; i < s; ++i)
      if (static_cast<const uint8_t*>(flags.raw_data())[i] != 0) ids[i] = id;
  }
  return Tensor::from_vector(ids, {s});
}

veomni::MultimodalBatch collate_one(const veomni::Sample& sample, const std::string& context,
                                    const veomni::ThinkerConfig& config) {
  veomni::MultimodalCollateOptions options;
  options.max_seq_len = sample.at("input_ids").numel();
  options.merge_unit = config.vision.spatial_merge_size * config.vision.spatial_merge_size;
  options.has_audio = config.has_audio;
  options.position_dtype = config.has_audio ? veomni::DType::F32 : veomni::DType::I64;
  return veomni::collate_multimodal({{&sample, context}}, options);
}

int run(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MERGED_DIR DATASET.h5 SAMPLE_INDEX OUT.safetensors\n", kTool);
    return 2;
  }
  const std::string merged = argv[1], dataset = argv[2], out = argv[4];
  const std::string config_path = merged + "/config.json";
  VEOMNI_INPUT_CHECK(std::filesystem::is_regular_file(config_path),
                     "{}: no config.json (is this a veomni-ckpt-merge output directory?)", merged);
  int64_t index = -1;
  try {
    index = std::stoll(argv[3]);
  } catch (const std::exception&) {
    throw veomni::InputError(fmt::format("SAMPLE_INDEX '{}' is not an integer", argv[3]));
  }
  const json config_json = veomni::read_json_file(config_path);
  const veomni::ThinkerConfig config = veomni::load_thinker_config(config_path);

  veomni::DatasetReader reader(dataset);
  VEOMNI_INPUT_CHECK(index >= 0 && index < reader.num_samples(), "{}: sample {} out of range (0..{})", dataset,
                     index, reader.num_samples() - 1);
  const veomni::Sample sample = reader.read(index);
  const std::string context = dataset + " sample " + std::to_string(index);
  const veomni::MultimodalBatch batch = collate_one(sample, context, config);

  veomni::MultimodalLM model(config, veomni::MultimodalOptions{});
  veomni::load_hf_weights(model.params(), veomni::HfCheckpointSource(merged));
  Tensor logits;
  const veomni::ForwardStats stats = model.forward(batch, false, &logits).stats;
  VEOMNI_CHECK(stats.valid_tokens > 0, "{}: no valid target", context);
  const double ce_loss = stats.ce_sum / static_cast<double>(stats.valid_tokens);

  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"logits", logits},
      {"input_ids", batch.text.input_ids},
      {"hf_input_ids", hf_input_ids(batch, config_json, config_path)},
      {"target_ids", batch.text.target_ids},
      {"position_ids", batch.text.position_ids}};
  for (const auto& [key, mask] : {std::pair<const char*, const Tensor*>{"image_mask", &batch.image_mask},
                                  {"video_mask", &batch.video_mask}, {"audio_mask", &batch.audio_mask}})
    if (mask->defined()) tensors.emplace_back(key, mask->to_dtype(veomni::DType::Bool));
  if (batch.pixel_values.defined() && batch.pixel_values.numel() > 0) {
    tensors.emplace_back("pixel_values", batch.pixel_values);
    tensors.emplace_back("image_grid_thw", grid_tensor(batch.image_grids));
  }
  if (batch.pixel_values_videos.defined() && batch.pixel_values_videos.numel() > 0) {
    tensors.emplace_back("pixel_values_videos", batch.pixel_values_videos);
    tensors.emplace_back("video_grid_thw", grid_tensor(batch.video_grids));
  }
  if (batch.input_features.defined() && batch.input_features.numel() > 0) {
    tensors.emplace_back("input_features", batch.input_features);
    tensors.emplace_back("audio_feature_lengths",
                         Tensor::from_vector(batch.audio_feature_lengths,
                                             {static_cast<int64_t>(batch.audio_feature_lengths.size())}));
  }
  veomni::write_safetensors(out, tensors,
                            {{"ce_loss", fmt::format("{:.17g}", ce_loss)},
                             {"valid_tokens", std::to_string(stats.valid_tokens)},
                             {"aux_loss", fmt::format("{:.17g}", stats.aux_loss)},
                             {"merged_dir", merged},
                             {"dataset", std::filesystem::path(dataset).filename().string()},
                             {"sample_index", std::to_string(index)}});
  std::printf("%s: logits [%lld, %lld] of %s (%lld parameters) on %s, ce loss %.9g over %lld targets\n",
              out.c_str(), static_cast<long long>(logits.shape()[0]), static_cast<long long>(logits.shape()[1]),
              config.model_type.c_str(), static_cast<long long>(model.params().num_elements()), context.c_str(),
              ce_loss, static_cast<long long>(stats.valid_tokens));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return veomni::run_tool(kTool, [&] { return run(argc, argv); });
}
