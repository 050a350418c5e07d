// The collective save of a training run: every rank writes its shard file into a temporary checkpoint directory,
// rank 0 adds the metrics log and metadata.json, renames the directory to global_step_N, then points `latest` at
// it (the commit) and removes checkpoints beyond the limit.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint_metadata.h"
#include "ckpt/shard_state.h"
#include "dist/communicator.h"
#include "train/metrics_log.h"

namespace veomni {

struct CheckpointSaveRequest {
  std::string output_dir;        // checkpoints go to <output_dir>/checkpoints/global_step_N
  int64_t save_total_limit = 0;  // keep the newest this many; 0 keeps all
  MeshShape mesh;
  TrainingPosition position;
  std::optional<DataPlanInfo> data_plan;
  ModelConfig model_config;
  ModelHead head = ModelHead::LanguageModel;  // the head the run trains (its objective's)
  // A multimodal model's whole config.json (model_config is then its text model only); "" for a text model.
  std::string hf_config_json;
  std::string train_config_yaml;
  std::string tokenizer_path;
  std::string producer;
  // An adapter checkpoint (model.lora_config enabled): the shards are the trainable parameters only, and the
  // metadata names the LoRA settings and the frozen base (rank 0 computes the base's identity once per run).
  std::optional<AdapterCheckpointInfo> adapter;
  // train.optimizer.type: which moments the shards hold (f32 for adamw, bf16 for anyprecision_adamw).
  std::string optimizer_type = "adamw";
  const MetricsLog* metrics = nullptr;  // rank 0: the log of steps 1..global_step (other ranks: ignored)
  // Failure tests: called with "rank_file" when this rank's shard file is half written, and on rank 0 with
  // "commit" once the directory is in place but `latest` does not name it yet.
  std::function<void(const std::string& point)> fault_point;
};

// Collective over `world` (every rank calls it with its own shards, in the same parameter order). Returns the
// checkpoint directory. A failure on any rank leaves only a temporary directory, removed by the next run.
std::string save_checkpoint(Communicator& world, const CheckpointSaveRequest& request,
                            const std::vector<ParamShardState>& shards);

}  // namespace veomni
