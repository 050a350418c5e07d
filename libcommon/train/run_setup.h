// What every run over a model shares (veomni-train, veomni-score): the model config, the device of this rank, the
// device mesh with its Ulysses SP and EP hooks, the model options and the model with the head a run reads.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "data/multimodal_collator.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "model/causal_lm.h"
#include "model/model_config.h"
#include "model/thinker/thinker_config.h"
#include "parallel/expert_parallel.h"
#include "parallel/ulysses.h"
#include "train/train_config.h"
#include "train/train_model.h"

namespace veomni {

// The model a config.json describes: a text model, or a multimodal one whose text model is `text`.
struct RunModelConfig {
  ModelConfig text;
  std::optional<ThinkerConfig> thinker;  // set for a multimodal model
  std::string hf_config_json;            // a multimodal model's config.json (checkpoints keep it); "" for text
  const std::string& model_type() const { return thinker ? thinker->model_type : text.model_type; }
};

// Reads config.json (or a directory holding one); InputError naming the file when it is missing or wrong.
RunModelConfig read_run_model_config(const std::string& config_path);

// This rank's device for train.device (auto | cpu | cuda): one GPU per process, chosen by the process's rank on its
// node (as torchrun's LOCAL_RANK). `tool` names the program in the one-process-per-GPU hint.
Device select_run_device(const std::string& want, const Communicator& world, const std::string& tool);

// The mesh over the world (world = dp_shard x ulysses, experts split over ep) and the hooks the model's layers call:
// Ulysses when ulysses_size > 1, expert parallelism when ep_size > 1. On a GPU the groups talk through NCCL.
struct RunParallel {
  DeviceMesh mesh;
  std::unique_ptr<UlyssesHooks> ulysses;
  std::unique_ptr<ExpertParallel> expert_parallel;
};
RunParallel build_run_parallel(std::shared_ptr<Communicator> world, const AcceleratorArgs& accelerator,
                               const ModelConfig& text, Device device);

// The model options of a run: the device, the compute dtype (float32 on the CPU, the reference numerics; the
// configured precision on a GPU), activation recomputation and the parallel hooks.
ModelOptions run_model_options(const TrainConfig& config, Device device, const RunParallel& parallel);

// Where a run model's parameter values live until FSDP takes them. Materialised: every parameter whole in f32 on
// the options' device (fp32 masters are staged in f32 whatever the compute dtype). Deferred: none; initialisation and
// loading record each one's start values and FSDP builds only this rank's shards from them, each in the dtype it
// keeps (a frozen parameter in the compute dtype only), so a rank's host memory never holds the whole model.
enum class RunModelValues { Materialised, Deferred };

// The model (text or multimodal body) with `head`, ready for initialisation or loading.
std::unique_ptr<TrainModel> make_run_model(const RunModelConfig& model, const ModelOptions& options, ModelHead head,
                                           bool freeze_vit, RunModelValues values = RunModelValues::Materialised);

// How a multimodal model's micro-batches are collated on this rank (its SP slice, merge unit, audio, positions).
MultimodalCollateOptions run_multimodal_collate_options(const ThinkerConfig& thinker, int64_t max_seq_len,
                                                        const DeviceMesh& mesh);

}  // namespace veomni
