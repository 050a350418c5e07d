// A checkpoint's metadata.json: format version, mesh, training position, model and run config, every parameter's
// name, shape, dtype and shard spec, and the rank files with their sizes. Written last; validated on read.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/base_model_identity.h"
#include "core/tensor.h"
#include "dist/device_mesh.h"
#include "model/lora_config.h"
#include "model/model_config.h"

namespace veomni {

inline constexpr const char* kCheckpointFormat = "veomni-checkpoint";
// metadata.json's newest format version. Version 2 added key 'model_head', version 3 the adapter checkpoint (keys
// 'lora' and 'base_model'), version 4 the mixed data plan (key 'data_plan.sources'), version 5 bfloat16 AdamW
// moments (key 'optimizer'); a writer uses the oldest version
// that describes the checkpoint (1 for the LM head), so older readers keep reading the checkpoints they understand.
inline constexpr int64_t kCheckpointFormatVersion = 5;
// The rank files' format version (unchanged by metadata.json's).
inline constexpr int64_t kRankFileFormatVersion = 1;
inline constexpr const char* kCheckpointMetadataFile = "metadata.json";
// The metrics log of the run up to the checkpoint's step (a resumed run continues it; see veomni-checkpoint(5)).
inline constexpr const char* kCheckpointMetricsFile = "log_dict.json";

// Where training stands after the checkpoint's last step: what a resumed run needs besides the tensors.
struct TrainingPosition {
  int64_t global_step = 0;      // optimizer steps completed
  int64_t optimizer_steps = 0;  // AdamW's step counter (its bias correction)
  int64_t epoch = 0;            // data position: the next step is step `step_in_epoch` (0-based) of epoch `epoch`
  int64_t step_in_epoch = 0;
  int64_t seed = 0;             // RNG state: the batch plan is a pure function of (sample lengths, epoch, seed)
  int64_t lr_total_steps = 0;   // the LR schedule (stateless) was computed for this many steps; 0 = none yet
  double last_lr = 0;           // learning rate of the last step
  bool operator==(const TrainingPosition&) const = default;
};

// One dataset of a mixed run (data.datasets), in the config's order.
struct DataPlanSource {
  std::string path;
  std::string name;
  double weight = 1.0;
  int64_t num_samples = 0;
  bool operator==(const DataPlanSource&) const = default;
};

// The inputs of the batch plan: a run resumed with other values would read other samples at the same position.
struct DataPlanInfo {
  std::string train_path;  // "" for a mixed run
  int64_t num_samples = 0;
  int64_t micro_batches_per_step = 0;
  int64_t token_budget = 0;
  int64_t max_seq_len = 0;
  bool shuffle = true;
  std::vector<DataPlanSource> sources;  // a mixed run's datasets (format version 4); empty otherwise
  bool operator==(const DataPlanInfo&) const = default;
};

// One parameter: its HF name, full shape, f32 masters; rank r of the mesh holds shard_spec_for(shape, expert, mesh, r)
// as a dataset of shard_numel elements (the FSDP shard, zero padded).
struct CheckpointParam {
  std::string name;
  Shape shape;
  bool expert = false;
  int64_t shard_numel = 0;
  bool operator==(const CheckpointParam&) const = default;
};

struct RankFileInfo {
  std::string file;      // inside the checkpoint directory
  uint64_t bytes = 0;    // its size when written (a shorter file was truncated)
  uint64_t checksum = 0; // file_checksum when written (any damaged byte changes it)
};

// An adapter checkpoint (model.lora_config enabled): its parameters are the trainable ones only (the adapters, and
// score.* when the head has one); the frozen base is named, not stored.
struct AdapterCheckpointInfo {
  LoraConfig lora;
  BaseModelIdentity base;
  bool operator==(const AdapterCheckpointInfo&) const = default;
};

struct CheckpointMetadata {
  std::string producer;  // version_text of the writing tool
  MeshShape mesh;
  TrainingPosition position;
  std::optional<DataPlanInfo> data_plan;  // absent in checkpoints made by veomni-ckpt-shard
  ModelConfig model_config;
  // The head on the body (key 'model_head', format version 2; absent in version 1: the LM head).
  ModelHead head = ModelHead::LanguageModel;
  // A multimodal model's whole config.json as text (key "hf_config"; model_config is then its text model only),
  // written by veomni-ckpt-merge in place of model_config's; "" for a text model.
  std::string hf_config_json;
  std::string train_config_yaml;  // the run's effective config; "" when made by veomni-ckpt-shard
  std::string tokenizer_path;     // the run's model.tokenizer_path ("" when it names none)
  std::vector<CheckpointParam> params;
  std::vector<RankFileInfo> rank_files;  // one per rank, in rank order
  bool has_metrics = false;              // log_dict.json beside metadata.json
  // Set for an adapter checkpoint (keys 'lora' and 'base_model', format version 3); absent for a full model's.
  std::optional<AdapterCheckpointInfo> adapter;
  // The optimizer whose moments the rank files hold (key 'optimizer': {"type", "moment_dtype"}, format version 5,
  // written for anyprecision_adamw only): "adamw" (float32 moments, the key absent) or "anyprecision_adamw" (bfloat16
  // moments, stored widened to float32 in the rank files, so exactly).
  std::string optimizer_type = "adamw";
};

// "rank-00002-of-00004.h5".
std::string rank_file_name(int64_t rank, int64_t world);

// The parameter entry for a parameter under a mesh (shard_numel from the shard spec).
CheckpointParam checkpoint_param(const std::string& name, const Shape& shape, bool expert, const MeshShape& mesh);

nlohmann::ordered_json checkpoint_metadata_to_json(const CheckpointMetadata& metadata);
// Validates everything (format and version, types, mesh, shard specs against shard_spec_for, one rank file per
// rank); errors are InputErrors naming `source` and the key.
CheckpointMetadata checkpoint_metadata_from_json(const nlohmann::json& json, const std::string& source);

// <dir>/metadata.json, atomically.
void write_checkpoint_metadata(const CheckpointMetadata& metadata, const std::string& dir);
CheckpointMetadata read_checkpoint_metadata(const std::string& dir);

}  // namespace veomni
