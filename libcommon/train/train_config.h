// The run configuration (VeOmni's model: / data: / train: sections): plain structs, their key table, loading from
// YAML with command-line overrides, validation and the saved effective config.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/yaml_config.h"
#include "kernels/kernel_settings.h"
#include "metrics/tensorboard_writer.h"
#include "model/lora_config.h"
#include "objective/objective_config.h"

namespace veomni {

struct ModelConfig;

struct ModelArgs {
  std::string config_path;     // HF config.json or a directory holding one; "" = model_path
  std::string model_path;      // HF checkpoint directory (config.json + safetensors); "" = random init
  std::string tokenizer_path;  // "" = config_path's directory (datasets are usually tokenized beforehand)
  LoraConfig lora_config;      // rank > 0: train LoRA adapters on the frozen model (VeOmni's model.lora_config)
  bool operator==(const ModelArgs&) const = default;
};

struct DataloaderArgs {
  bool shuffle = true;  // reshuffle the sample order every epoch (seeded by train.seed)
  bool operator==(const DataloaderArgs&) const = default;
};

struct DataArgs {
  std::string train_path;     // dataset.h5 written by veomni-preprocess or veomni-dummy-data
  std::string eval_path;      // validation dataset of the same kind; "" = no validation
  // Several datasets mixed by weight instead of train_path: "{path: a.h5, weight: 0.7, name: math}" per entry (the
  // YAML may write each as a mapping); see train/data_sources.h.
  std::vector<std::string> datasets;
  int64_t max_seq_len = 2048; // tokens per packed micro-batch sequence
  // The chat template the datasets must have been rendered with: "" (not checked), "chatml", "model" (the tokenizer
  // folder's own) or a template file; see train/chat_template_check.h.
  std::string chat_template;
  DataloaderArgs dataloader;
  bool operator==(const DataArgs&) const = default;
};

struct OptimizerArgs {
  std::string type = "adamw";
  double lr = 5e-5;  // peak learning rate, reached after warmup
  double lr_min = 1e-7;
  double lr_warmup_ratio = 0.0;
  std::string lr_decay_style = "constant";  // constant | linear | cosine
  double weight_decay = 0.0;
  double max_grad_norm = 1.0;  // <= 0 disables clipping
  std::vector<double> betas = {0.9, 0.95};
  double eps = 1e-8;
  std::vector<std::string> no_decay_modules;                 // module types without weight decay (RMSNorm, ...)
  std::vector<std::string> no_decay_params = {"bias", "norm"};  // name substrings without weight decay
  bool operator==(const OptimizerArgs&) const = default;
};

struct MixedPrecisionArgs {
  bool enable = true;                     // false: everything in float32
  std::string param_dtype = "bfloat16";   // compute dtype of gathered parameters and activations
  std::string reduce_dtype = "float32";   // dtype of gradient reduce-scatter / all-reduce
  bool operator==(const MixedPrecisionArgs&) const = default;
};

struct FsdpArgs {
  MixedPrecisionArgs mixed_precision;
  bool overlap = true;  // prefetch the next group's all-gather and leave reduce-scatters running (false: debugging)
  bool offload = false;  // fp32 masters and the AdamW moments in host memory, the step on the CPU
  bool operator==(const FsdpArgs&) const = default;
};

struct AcceleratorArgs {
  int64_t ulysses_size = 1;  // sequence-parallel group size
  int64_t ep_size = 1;       // expert-parallel group size
  double dist_timeout = 600;  // seconds a rank waits in one collective before the run aborts; 0 waits forever
  // The decoder layers' dense projections run their forward and input-gradient GEMMs as rowwise-scaled FP8 (E4M3);
  // CUDA with bf16 compute only.
  bool fp8 = false;
  FsdpArgs fsdp_config;
  bool operator==(const AcceleratorArgs&) const = default;
};

// Kernel choices that change how (not what) the model computes; each has a VEOMNI_* environment override
// (train/environment_overrides.h).
struct KernelArgs {
  std::string attention_backend = "auto";  // CUDA: auto (cuDNN where it can, else ours) | cudnn | native
  bool gemm_autotune = false;              // CUDA: time cuBLASLt's candidate algorithms at a GEMM shape's first use
  std::string grouped_gemm = "grouped";    // CUDA: grouped (one cuBLAS grouped call) | loop (one call per group)
  bool debug_checks = false;               // CUDA: range checks of token ids and labels on the device (each waits)
  bool operator==(const KernelArgs&) const = default;
};

// The per-op time table (kernels/op_profiler.h), printed at exit.
struct OpProfileArgs {
  bool enable = false;
  std::string out;         // also write the table to <out>.rank<r> on every rank; "" = stderr of rank 0 only
  int64_t skip_steps = 0;  // leave the run's first N steps (warm-up) out of the table
  bool operator==(const OpProfileArgs&) const = default;
};

struct GradientCheckpointingArgs {
  bool enable = true;  // recompute each decoder layer's activations in backward
  bool operator==(const GradientCheckpointingArgs&) const = default;
};

struct CheckpointArgs {
  std::string output_dir = "output";  // checkpoints under output_dir/checkpoints/global_step_N
  int64_t save_steps = 0;             // 0 = only at the end
  int64_t save_total_limit = 0;       // keep the newest N checkpoints; 0 = keep all
  std::string load_path;              // checkpoint to resume from, or "auto" (output_dir's latest); "" = start fresh
  bool save_on_signal = true;         // SIGTERM / SIGINT: checkpoint at the next step boundary and exit 0
  bool save_hf_weights = false;       // also write the weights as an HF model directory, <checkpoint>/hf_ckpt
  int64_t hf_save_steps = 0;          // HF weights every N steps (with a checkpoint); 0 = only at the end
  bool operator==(const CheckpointArgs&) const = default;
};

struct TrainArgs {
  int64_t global_batch_size = -1;  // samples per optimizer step; -1 = micro_batch_size × data-parallel size
  int64_t micro_batch_size = 1;    // samples per forward/backward on one rank
  int64_t num_train_epochs = 1;
  int64_t max_steps = -1;          // caps the steps of each epoch (VeOmni); -1 = whole epochs
  int64_t seed = 42;
  bool abort_on_nan = true;
  int64_t log_steps = 1;
  // TensorBoard event files under checkpoint.output_dir/tensorboard (rank 0); on by default where the build can.
  bool use_tensorboard = tensorboard_supported();
  int64_t eval_steps = 0;    // validate on data.eval_path every N steps and at the end; 0 = only at the end
  int64_t eval_batches = 0;  // micro-batches of the eval set per data-parallel rank; 0 = the whole eval set
  std::string device = "auto";      // auto (GPU when the build has CUDA and one is visible) | cpu | cuda
  std::string precision = "mixed";  // mixed (accelerator.fsdp_config.mixed_precision) | fp32 (exact alignment runs)
  std::string objective = "sft";    // sft | dpo | reward | value | ppo_actor (train/objective.h)
  objective::DpoConfig dpo_config;      // objective dpo (VeOmni's dpo_config)
  objective::PpoActorConfig actor;      // objective ppo_actor (verl's actor keys)
  objective::ValueConfig critic;        // objective value (verl's critic keys)
  // Multimodal models (VeOmni's VLM trainer arguments). Frozen parameters keep their values exactly: no update, no
  // weight decay, no part in the gradient norm.
  bool freeze_vit = false;          // the vision tower (Qwen3-Omni: all but visual.merger, as VeOmni)
  bool freeze_audio_tower = false;  // the audio encoder but audio_tower.proj1 (as VeOmni)
  double vit_lr = 1e-6;             // peak learning rate of the vision tower's parameters (VeOmni's default)
  double audio_lr = -1;             // peak learning rate of the audio encoder's; -1: optimizer.lr (VeOmni has none)
  GradientCheckpointingArgs gradient_checkpointing;
  KernelArgs kernels;
  OpProfileArgs op_profile;
  OptimizerArgs optimizer;
  AcceleratorArgs accelerator;
  CheckpointArgs checkpoint;
  bool operator==(const TrainArgs&) const = default;
};

struct TrainConfig {
  ModelArgs model;
  DataArgs data;
  TrainArgs train;
  bool operator==(const TrainConfig&) const = default;

  // The config.json to read: model.config_path, else model.model_path.
  std::string resolved_model_config_path() const;
  // F32 when train.precision is fp32 or mixed precision is off, else param_dtype.
  DType compute_dtype() const;
  DType reduce_dtype() const;
  // Optimizer steps of the whole run for an epoch of steps_per_epoch steps: num_train_epochs × min(steps_per_epoch,
  // max_steps when set).
  int64_t total_train_steps(int64_t steps_per_epoch) const;
};

// train.kernels and train.op_profile as the kernels take them (apply_kernel_settings).
KernelSettings kernel_settings_of(const TrainConfig& config);

// How a global batch splits over a data-parallel group.
struct BatchLayout {
  int64_t global_batch_size = 0;
  int64_t micro_batch_size = 0;
  int64_t dp_size = 0;
  int64_t grad_accum_steps = 0;  // micro-batches per rank per optimizer step
};

// The key table: every key of the config, its type, default and help (the man page veomni-config(5) lists it).
const ConfigSchema<TrainConfig>& train_config_schema();

// Parses YAML text (source names it in errors); keys not given keep their defaults. Throws InputError.
TrainConfig train_config_from_yaml(std::string_view text, const std::string& source);
// Reads a YAML file; InputError when it is missing or wrong.
TrainConfig load_train_config(const std::string& path);
// Applies command-line overrides ("--train.optimizer.lr 1e-4", "--train.optimizer.lr=1e-4"), e.g. the arguments
// CLI11 leaves over with allow_extras(). Throws InputError.
void apply_train_config_overrides(TrainConfig& config, const std::vector<std::string>& args);
// load_train_config + apply_train_config_overrides + the VEOMNI_* environment overrides (logged;
// train/environment_overrides.h) + validate_train_config.
TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides);

// Cross-field checks that need no world size; throws InputError naming the keys.
void validate_train_config(const TrainConfig& config);
// Checks that need the process count: world_size divisible by ulysses_size and ep_size, and the global batch by
// micro_batch_size × data-parallel size (world_size / ulysses_size). Returns the resolved layout.
BatchLayout resolve_batch_layout(const TrainConfig& config, int64_t world_size);
// Checks against the model: ep_size divides num_experts (and is 1 for a dense model), ulysses_size divides the
// attention heads and is a divisor or a multiple of the kv heads.
void validate_parallel_layout(const TrainConfig& config, const ModelConfig& model);

// The full effective config as YAML (every key, sectioned); train_config_from_yaml of it gives back `config`.
std::string train_config_to_yaml(const TrainConfig& config);
// Writes train_config_to_yaml atomically (the run saves it as <output_dir>/veomni_cli.yaml, as VeOmni does).
void save_train_config(const TrainConfig& config, const std::string& path);

}  // namespace veomni
