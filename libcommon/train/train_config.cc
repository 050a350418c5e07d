// The run configuration's key table (VeOmni names), its loading, overrides, cross-field checks and saving.
#include "train/train_config.h"

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "model/model_config.h"
#include "train/data_sources.h"
#include "train/environment_overrides.h"
#include "train/objective_names.h"

namespace veomni {

namespace {

// One line per key. The key is the member path, so the two cannot drift apart; the default is the member's
// initial value in train_config.h.
#define VEOMNI_CONFIG_FIELD(schema, path, ...) \
  schema.add(#path, [](auto& c) -> auto& { return c.path; }, __VA_ARGS__)

ConfigSchema<TrainConfig> build_schema() {
  ConfigSchema<TrainConfig> s;
  const ConfigFieldOptions minus_one_when_null{.null_means = "-1"};

  VEOMNI_CONFIG_FIELD(s, model.config_path, "HF config.json of the model, or a directory holding one. Empty: model.model_path.");
  VEOMNI_CONFIG_FIELD(s, model.model_path, "HF checkpoint directory (config.json + safetensors) to start from. Empty: random initialisation.");
  VEOMNI_CONFIG_FIELD(s, model.tokenizer_path, "Tokenizer directory. Empty: the directory of the model config.");
  VEOMNI_CONFIG_FIELD(s, model.lora_config.rank, "LoRA: rank r of the adapters; > 0 trains adapters on the frozen model (held in the compute dtype only: no float32 master, no gradient, no optimizer state). 0: full fine-tuning.");
  VEOMNI_CONFIG_FIELD(s, model.lora_config.alpha, "LoRA: the adapters' output is scaled by alpha / rank (alpha / sqrt(rank) with use_rslora).");
  VEOMNI_CONFIG_FIELD(s, model.lora_config.use_rslora, "LoRA: rank-stabilised scale alpha / sqrt(rank).");
  VEOMNI_CONFIG_FIELD(s, model.lora_config.lora_modules, "LoRA: the projections that get adapters, matched as PEFT matches a list: an entry names a module or its last name components (q_proj matches every layer's self_attn.q_proj, and in Qwen3-Omni the audio encoder's too). In MoE layers gate_proj and up_proj (both) select the experts' fused gate_up_proj, down_proj the experts' down_proj. Vision tower: attn.qkv, attn.proj, mlp.linear_fc1, mlp.linear_fc2. An entry that matches no module is an error.");
  VEOMNI_CONFIG_FIELD(s, model.lora_config.exclude_modules, "LoRA: a regular expression (full match) of module names left without adapters, e.g. '.*(visual|audio_tower).*' for the language model only. Empty: none.");
  VEOMNI_CONFIG_FIELD(s, model.lora_config.share_expert_lora, "LoRA on MoE experts: one adapter per layer shared by all its experts (false: one per expert).");

  VEOMNI_CONFIG_FIELD(s, data.train_path, "Training dataset (HDF5, from veomni-preprocess or veomni-dummy-data); a .yaml file is read as VeOmni's multisource file (sources, names, one const schedule's weights) and mixed as data.datasets.");
  VEOMNI_CONFIG_FIELD(s, data.eval_path, "Validation dataset (HDF5) of the same kind as data.train_path (the same objective keys), evaluated forward only every train.eval_steps steps and at the end of the run. Empty: no validation.");
  VEOMNI_CONFIG_FIELD(s, data.datasets, "Several training datasets mixed by weight, instead of data.train_path: a list of {path, weight, name} (weight 1 and the file's stem when left out). Each sample slot of a global batch draws its source with probability weight / sum of weights (seeded by train.seed); within a source samples follow its own shuffled order, restarted with a new shuffle when it runs out. An epoch draws as many samples as the sources with a positive weight hold. Every source must be the same kind of dataset. SFT logs loss_<name> per source.", {.mapping_items = true});
  VEOMNI_CONFIG_FIELD(s, data.chat_template, "The chat template every dataset (data.train_path, data.datasets, data.eval_path) must have been rendered with, as veomni-preprocess records it: chatml (our built-in ChatML), model (the template beside the tokenizer, model.tokenizer_path or the model config's directory), or a .jinja/.json template file; compared by the template's SHA-256. Empty: not checked.");
  VEOMNI_CONFIG_FIELD(s, data.max_seq_len, "Maximum tokens of one packed micro-batch sequence.");
  VEOMNI_CONFIG_FIELD(s, data.dataloader.shuffle, "Shuffle the sample order every epoch (seeded by train.seed).");

  VEOMNI_CONFIG_FIELD(s, train.global_batch_size, "Samples per optimizer step over all ranks. -1 (or null): micro_batch_size x data-parallel size.", minus_one_when_null);
  VEOMNI_CONFIG_FIELD(s, train.micro_batch_size, "Samples per forward/backward on one rank; micro-batches accumulate up to the global batch.");
  VEOMNI_CONFIG_FIELD(s, train.num_train_epochs, "Passes over the dataset.");
  VEOMNI_CONFIG_FIELD(s, train.max_steps, "Caps the optimizer steps of each epoch (for short runs). -1 (or null): whole epochs.", minus_one_when_null);
  VEOMNI_CONFIG_FIELD(s, train.seed, "Seed of weight initialisation and data shuffling.");
  VEOMNI_CONFIG_FIELD(s, train.abort_on_nan, "Stop the run (exit 1) when the loss is not finite (NaN or inf).");
  VEOMNI_CONFIG_FIELD(s, train.log_steps, "Print a progress line every this many steps (metrics are recorded every step).");
  VEOMNI_CONFIG_FIELD(s, train.use_tensorboard, "Write every step's metrics as TensorBoard scalars under train.checkpoint.output_dir/tensorboard (rank 0; view with tensorboard --logdir). Default true where the build has protobuf, false where it has not; true on such a build is an error.");
  VEOMNI_CONFIG_FIELD(s, train.eval_steps, "With data.eval_path: validate every this many optimizer steps, and always once at the end of the run; 0: only at the end.");
  VEOMNI_CONFIG_FIELD(s, train.eval_batches, "With data.eval_path: evaluate the first this many micro-batches of the eval set per data-parallel rank (the first eval_batches x data-parallel size in the set's fixed order); 0: the whole eval set.");
  VEOMNI_CONFIG_FIELD(s, train.device, "Where to train: auto (one GPU per rank, chosen by node-local rank, when the build has CUDA and GPUs are visible; else the CPU), cpu, or cuda (an error without a GPU).", {.choices = {"auto", "cpu", "cuda"}});
  VEOMNI_CONFIG_FIELD(s, train.precision, "mixed: compute as train.accelerator.fsdp_config.mixed_precision says (bf16 with float32 master weights); fp32: everything in float32 (alignment runs). The CPU backend always computes in float32.", {.choices = {"mixed", "fp32"}});
  VEOMNI_CONFIG_FIELD(s, train.objective, "What the run optimises: sft (next-token cross-entropy), dpo (preference pairs against a frozen reference; train.dpo_config), reward (Bradley-Terry reward model: a value head read at each sequence's last token), value (critic: a value per token, clipped value loss; train.critic), ppo_actor (PPO clipped surrogate on rollouts; train.actor).", {.choices = {"sft", "dpo", "reward", "value", "ppo_actor"}});
  VEOMNI_CONFIG_FIELD(s, train.dpo_config.beta, "DPO: temperature of the implicit reward beta (log pi - log pi_ref); > 0.");
  VEOMNI_CONFIG_FIELD(s, train.dpo_config.label_smoothing, "DPO: conservative DPO label smoothing in [0, 0.5] (sigmoid loss only).");
  VEOMNI_CONFIG_FIELD(s, train.dpo_config.loss_type, "DPO loss: sigmoid (-log sigmoid(beta z)) or ipo ((z - 1/(2 beta))^2).", {.choices = {"sigmoid", "ipo"}});
  VEOMNI_CONFIG_FIELD(s, train.dpo_config.reference_free, "DPO: the loss ignores the reference log-probs (no reference model runs unless the rewards need one: they use the dataset's or zeros).");
  VEOMNI_CONFIG_FIELD(s, train.dpo_config.refer_model_precision, "DPO: compute dtype of the frozen reference model when the policy computes in bf16 (a float32 run keeps it in float32).", {.choices = {"bfloat16", "float32"}});
  VEOMNI_CONFIG_FIELD(s, train.actor.clip_ratio, "PPO actor: clip range epsilon of the probability ratio.");
  VEOMNI_CONFIG_FIELD(s, train.actor.clip_ratio_low, "PPO actor: lower clip epsilon. -1 (or null): clip_ratio.", minus_one_when_null);
  VEOMNI_CONFIG_FIELD(s, train.actor.clip_ratio_high, "PPO actor: upper clip epsilon. -1 (or null): clip_ratio.", minus_one_when_null);
  VEOMNI_CONFIG_FIELD(s, train.actor.clip_ratio_c, "PPO actor: dual-clip bound for negative advantages; > 1.");
  VEOMNI_CONFIG_FIELD(s, train.actor.entropy_coeff, "PPO actor: the loss subtracts entropy_coeff x the token-mean entropy of the policy.");
  VEOMNI_CONFIG_FIELD(s, train.actor.use_kl_loss, "PPO actor: add kl_loss_coef x the token-mean KL to the dataset's ref_log_probs.");
  VEOMNI_CONFIG_FIELD(s, train.actor.kl_loss_coef, "PPO actor: weight of the KL loss.");
  VEOMNI_CONFIG_FIELD(s, train.actor.kl_loss_type, "PPO actor: KL estimator (verl's kl_penalty).", {.choices = {"low_var_kl", "kl", "k1", "abs", "mse", "k2", "k3"}});
  VEOMNI_CONFIG_FIELD(s, train.critic.cliprange_value, "Value model: new values stay within old_values +- cliprange_value in the clipped loss.");
  VEOMNI_CONFIG_FIELD(s, train.freeze_vit, "Multimodal models: freeze the vision tower (Qwen3-Omni: all of it but visual.merger, as VeOmni). Frozen parameters are not updated and not counted in the gradient norm.");
  VEOMNI_CONFIG_FIELD(s, train.freeze_audio_tower, "Qwen3-Omni: freeze the audio encoder but audio_tower.proj1 (as VeOmni).");
  VEOMNI_CONFIG_FIELD(s, train.vit_lr, "Multimodal models: peak learning rate of the vision tower's parameters (VeOmni's vit_lr; it follows the schedule of train.optimizer.lr, scaled).");
  VEOMNI_CONFIG_FIELD(s, train.audio_lr, "Qwen3-Omni: peak learning rate of the audio encoder's parameters, scaled like vit_lr. -1 (or null): train.optimizer.lr (VeOmni trains the audio encoder with the language model's group).", minus_one_when_null);
  VEOMNI_CONFIG_FIELD(s, train.gradient_checkpointing.enable, "Recompute each decoder layer's activations in backward instead of keeping them.");

  VEOMNI_CONFIG_FIELD(s, train.kernels.attention_backend, "CUDA builds: attention kernel. auto: cuDNN's fused attention where it takes the case, else ours; cudnn: cuDNN only (a case it cannot take is an error); native: ours only. Environment override: VEOMNI_ATTENTION_BACKEND.", {.choices = {"auto", "cudnn", "native"}});
  VEOMNI_CONFIG_FIELD(s, train.kernels.gemm_autotune, "CUDA builds: time cuBLASLt's candidate algorithms at each GEMM shape's first use and keep the fastest (false: cuBLASLt's heuristic pick). Environment override: VEOMNI_GEMM_AUTOTUNE=0|1.");
  VEOMNI_CONFIG_FIELD(s, train.kernels.grouped_gemm, "CUDA builds: MoE expert GEMMs as one cuBLAS grouped call (grouped) or one call per expert (loop, for comparison). Environment override: VEOMNI_GROUPED_GEMM.", {.choices = {"grouped", "loop"}});
  VEOMNI_CONFIG_FIELD(s, train.kernels.debug_checks, "CUDA builds: check on the device, in every embedding, cross-entropy and label log-prob op, that token ids and labels lie in the vocabulary (each check waits for the GPU). Off: the ids are checked once on the host when the micro-batch is built, which is enough for data read by veomni-train. Environment override: VEOMNI_DEBUG_CHECKS=0|1.");
  VEOMNI_CONFIG_FIELD(s, train.op_profile.enable, "Time every op (CUDA events on a GPU) and print the table of op times at exit on rank 0. Environment override: VEOMNI_PROFILE_OPS=0|1.");
  VEOMNI_CONFIG_FIELD(s, train.op_profile.out, "With op_profile.enable: also write every rank's table to <out>.rank<r>. Environment override: VEOMNI_PROFILE_OPS_OUT.");
  VEOMNI_CONFIG_FIELD(s, train.op_profile.skip_steps, "With op_profile.enable: leave the run's first this many steps (warm-up) out of the table. Environment override: VEOMNI_PROFILE_OPS_SKIP_STEPS.");

  VEOMNI_CONFIG_FIELD(s, train.optimizer.type, "Optimizer. adamw: torch's AdamW with float32 moments (16 bytes a trainable parameter with master and gradient); anyprecision_adamw: the same update with both moments stored in bfloat16 (12 bytes a parameter); the masters are float32 in both.", {.choices = {"adamw", "anyprecision_adamw"}});
  VEOMNI_CONFIG_FIELD(s, train.optimizer.lr, "Peak learning rate, reached at the end of warmup.");
  VEOMNI_CONFIG_FIELD(s, train.optimizer.lr_min, "Learning rate at the end of linear or cosine decay.");
  VEOMNI_CONFIG_FIELD(s, train.optimizer.lr_warmup_ratio, "Fraction of the total steps spent warming up linearly from 0.");
  VEOMNI_CONFIG_FIELD(s, train.optimizer.lr_decay_style, "Schedule after warmup.", {.choices = {"constant", "linear", "cosine"}});
  VEOMNI_CONFIG_FIELD(s, train.optimizer.weight_decay, "AdamW decoupled weight decay (not applied to the parameters no_decay_modules and no_decay_params select).");
  VEOMNI_CONFIG_FIELD(s, train.optimizer.max_grad_norm, "Clip the global gradient norm to this value; 0 disables clipping.");
  VEOMNI_CONFIG_FIELD(s, train.optimizer.betas, "AdamW beta1 and beta2.");
  VEOMNI_CONFIG_FIELD(s, train.optimizer.eps, "AdamW epsilon.");
  VEOMNI_CONFIG_FIELD(s, train.optimizer.no_decay_modules, "Module types whose parameters get no weight decay: RMSNorm, LayerNorm, Embedding, Linear, Experts, Conv2d, Conv3d, also with transformers' model prefix (Qwen3RMSNorm). An entry that matches no module of the model is an error.");
  VEOMNI_CONFIG_FIELD(s, train.optimizer.no_decay_params, "Parameters that get no weight decay: an entry is a case-insensitive substring of the HF parameter name. The default leaves norms and biases undecayed; [] decays every parameter. An entry that matches no parameter is an error (the default is not checked).");

  VEOMNI_CONFIG_FIELD(s, train.accelerator.ulysses_size, "Ulysses sequence-parallel size; divides the world size.");
  VEOMNI_CONFIG_FIELD(s, train.accelerator.ep_size, "Expert-parallel size (MoE); divides the world size and the number of experts.");
  VEOMNI_CONFIG_FIELD(s, train.accelerator.dist_timeout, "Seconds a rank waits in one collective for its peers before the run aborts, naming the ranks that did not arrive (exit 1); 0 waits forever. The environment variable VEOMNI_COLLECTIVE_TIMEOUT overrides it.");
  VEOMNI_CONFIG_FIELD(s, train.accelerator.fp8, "FP8 linears: the decoder layers' dense projections (q/k/v/o, gate/up/down) compute y = x W^T and dx = dy W as E4M3 GEMMs with one scale per row of each operand (per token; per weight row, per weight column for dx), f32 accumulation and bf16 output; dW, the master weights, the experts, the embeddings, the LM head, the vision and audio towers and LoRA adapters stay as they are. CUDA with bf16 compute only (mixed precision on, param_dtype bfloat16).");
  VEOMNI_CONFIG_FIELD(s, train.accelerator.fsdp_config.mixed_precision.enable, "Compute in param_dtype with float32 master weights; false computes in float32.");
  VEOMNI_CONFIG_FIELD(s, train.accelerator.fsdp_config.mixed_precision.param_dtype, "Compute dtype of parameters and activations under mixed precision.", {.choices = {"bfloat16", "float32"}});
  VEOMNI_CONFIG_FIELD(s, train.accelerator.fsdp_config.mixed_precision.reduce_dtype, "Dtype of gradient reduction under mixed precision.", {.choices = {"float32", "bfloat16"}});
  VEOMNI_CONFIG_FIELD(s, train.accelerator.fsdp_config.overlap, "Overlap FSDP communication with compute: gather the next parameter group while this one computes, and leave gradient reduce-scatters running until the next group's backward ends. Same results either way; false makes every collective block in place (for debugging).");
  VEOMNI_CONFIG_FIELD(s, train.accelerator.fsdp_config.offload, "Optimizer offload: the float32 master weights and the AdamW moments live in host memory (12 bytes a parameter) and the optimizer step runs on the CPU, streaming the gradients in chunks; the GPU keeps the parameters in the compute dtype, their float32 gradients, the activations and the collectives' buffers. Same results as without it, bit for bit.");

  VEOMNI_CONFIG_FIELD(s, train.checkpoint.output_dir, "Run directory: checkpoints/global_step_N, log_dict.json, the saved config.");
  VEOMNI_CONFIG_FIELD(s, train.checkpoint.save_steps, "Save a checkpoint every this many steps, and at the end of the run; 0: only at the end; -1: never (benchmarks; nothing to resume from).");
  VEOMNI_CONFIG_FIELD(s, train.checkpoint.save_total_limit, "Keep only the newest this many checkpoints; 0 keeps all.");
  VEOMNI_CONFIG_FIELD(s, train.checkpoint.save_on_signal, "On SIGTERM or SIGINT (a preemption, Ctrl-C) on any rank: every rank finishes its step, a checkpoint of it is saved and the run exits 0. false: the signal ends the process at once.");
  VEOMNI_CONFIG_FIELD(s, train.checkpoint.save_hf_weights, "Also write the model as a HuggingFace directory, <checkpoint>/hf_ckpt, as veomni-ckpt-merge writes it (float32, the run's tokenizer files; a LoRA run's adapters merged into the base): at the end of the run, and every hf_save_steps steps.");
  VEOMNI_CONFIG_FIELD(s, train.checkpoint.hf_save_steps, "With save_hf_weights: write hf_ckpt every this many steps (a checkpoint is saved at those steps too); 0: only at the end of the run.");
  VEOMNI_CONFIG_FIELD(s, train.checkpoint.load_path, "Checkpoint to resume from: a global_step_N directory (or a directory holding `latest`), or auto: output_dir's latest checkpoint when there is one, else start fresh. Empty: start fresh.");
  return s;
}

#undef VEOMNI_CONFIG_FIELD

void check(bool ok, const std::string& message) {
  if (!ok) throw InputError("invalid config: " + message);
}

bool in_unit_interval(double v) { return v >= 0.0 && v <= 1.0; }

void validate_model_and_data(const TrainConfig& c) {
  check(!c.model.config_path.empty() || !c.model.model_path.empty(),
        "model.config_path and model.model_path are both empty; set one of them");
  check(c.data.train_path.empty() || c.data.datasets.empty(),
        "data.train_path and data.datasets are both set; give one dataset in data.train_path or several, mixed by "
        "weight, in data.datasets");
  check(!c.data.train_path.empty() || !c.data.datasets.empty(),
        "data.train_path is empty; set it in the YAML or with --data.train_path PATH (or list several datasets in "
        "data.datasets)");
  parse_data_sources(c.data.datasets);  // InputErrors naming data.datasets[i]
  check(c.data.max_seq_len > 0, fmt::format("data.max_seq_len must be positive, got {}", c.data.max_seq_len));
  c.model.lora_config.validate("model.lora_config");
}

void validate_steps_and_batch(const TrainArgs& t) {
  check(t.micro_batch_size > 0, fmt::format("train.micro_batch_size must be positive, got {}", t.micro_batch_size));
  check(t.global_batch_size == -1 || t.global_batch_size > 0,
        fmt::format("train.global_batch_size must be positive or -1, got {}", t.global_batch_size));
  check(t.global_batch_size == -1 || t.global_batch_size % t.micro_batch_size == 0,
        fmt::format("train.global_batch_size ({}) must be a multiple of train.micro_batch_size ({})",
                    t.global_batch_size, t.micro_batch_size));
  check(t.num_train_epochs > 0, fmt::format("train.num_train_epochs must be positive, got {}", t.num_train_epochs));
  check(t.max_steps == -1 || t.max_steps > 0, fmt::format("train.max_steps must be positive or -1, got {}", t.max_steps));
  check(t.seed >= 0, fmt::format("train.seed must be >= 0, got {}", t.seed));
  check(t.log_steps > 0, fmt::format("train.log_steps must be positive, got {}", t.log_steps));
  check(t.eval_steps >= 0, fmt::format("train.eval_steps must be >= 0, got {}", t.eval_steps));
  check(t.eval_batches >= 0, fmt::format("train.eval_batches must be >= 0 (0: the whole eval set), got {}",
                                         t.eval_batches));
}

void validate_optimizer(const OptimizerArgs& o) {
  check(o.lr > 0, fmt::format("train.optimizer.lr must be positive, got {}", o.lr));
  check(o.lr_min >= 0 && o.lr_min <= o.lr,
        fmt::format("train.optimizer.lr_min must be in [0, train.optimizer.lr = {}], got {}", o.lr, o.lr_min));
  check(in_unit_interval(o.lr_warmup_ratio),
        fmt::format("train.optimizer.lr_warmup_ratio must be in [0, 1], got {}", o.lr_warmup_ratio));
  check(o.weight_decay >= 0, fmt::format("train.optimizer.weight_decay must be >= 0, got {}", o.weight_decay));
  check(o.max_grad_norm >= 0, fmt::format("train.optimizer.max_grad_norm must be >= 0, got {}", o.max_grad_norm));
  check(o.betas.size() == 2 && o.betas[0] >= 0 && o.betas[0] < 1 && o.betas[1] >= 0 && o.betas[1] < 1,
        fmt::format("train.optimizer.betas must be two values in [0, 1), got [{}]", fmt::join(o.betas, ", ")));
  check(o.eps > 0, fmt::format("train.optimizer.eps must be positive, got {}", o.eps));
}

void validate_tower_learning_rates(const TrainArgs& t) {
  check(t.vit_lr >= 0, fmt::format("train.vit_lr must be >= 0, got {}", t.vit_lr));
  check(t.audio_lr == -1 || t.audio_lr >= 0, fmt::format("train.audio_lr must be >= 0 or -1, got {}", t.audio_lr));
}

void validate_accelerator_and_checkpoint(const TrainArgs& t) {
  const AcceleratorArgs& a = t.accelerator;
  check(a.ulysses_size >= 1, fmt::format("train.accelerator.ulysses_size must be >= 1, got {}", a.ulysses_size));
  check(a.ep_size >= 1, fmt::format("train.accelerator.ep_size must be >= 1, got {}", a.ep_size));
  check(a.dist_timeout >= 0, fmt::format("train.accelerator.dist_timeout must be >= 0 seconds, got {}", a.dist_timeout));
  check(!a.fp8 || t.device != "cpu",
        "train.accelerator.fp8 needs a CUDA device, but train.device is cpu (FP8 GEMMs run on Hopper GPUs only)");
  const MixedPrecisionArgs& mp = a.fsdp_config.mixed_precision;
  check(!a.fp8 || (t.precision != "fp32" && mp.enable && mp.param_dtype == "bfloat16"),
        fmt::format("train.accelerator.fp8 needs bf16 compute, but it is float32 (train.precision {}, "
                    "train.accelerator.fsdp_config.mixed_precision.enable {}, param_dtype {})",
                    t.precision, mp.enable, mp.param_dtype));
  const CheckpointArgs& ck = t.checkpoint;
  check(!ck.output_dir.empty(), "train.checkpoint.output_dir is empty");
  check(ck.save_steps >= -1, fmt::format("train.checkpoint.save_steps must be >= -1, got {}", ck.save_steps));
  check(t.op_profile.skip_steps >= 0,
        fmt::format("train.op_profile.skip_steps must be >= 0, got {}", t.op_profile.skip_steps));
  check(ck.hf_save_steps >= 0, fmt::format("train.checkpoint.hf_save_steps must be >= 0, got {}", ck.hf_save_steps));
  check(!(ck.save_hf_weights && ck.save_steps == -1),
        "train.checkpoint.save_hf_weights needs checkpoints, but train.checkpoint.save_steps is -1 (never) (hint: "
        "save_steps 0 saves one at the end)");
  check(ck.save_total_limit >= 0,
        fmt::format("train.checkpoint.save_total_limit must be >= 0, got {}", ck.save_total_limit));
}

// String keys with a fixed set of values (lr_decay_style, dtypes, ...): the table's choices, also for configs
// edited in code after loading.
void validate_choices(const TrainConfig& c) {
  const auto& fields = train_config_schema().fields();
  const std::vector<ConfigValue> values = train_config_schema().values(c);
  for (size_t i = 0; i < fields.size(); ++i) {
    const auto& choices = fields[i].options.choices;
    if (choices.empty()) continue;
    const auto& value = std::get<std::string>(values[i]);
    check(std::find(choices.begin(), choices.end(), value) != choices.end(),
          fmt::format("{} must be one of {}, got '{}'", fields[i].key, fmt::join(choices, ", "), value));
  }
}

}  // namespace

const ConfigSchema<TrainConfig>& train_config_schema() {
  static const ConfigSchema<TrainConfig> schema = build_schema();
  return schema;
}

std::string TrainConfig::resolved_model_config_path() const {
  return model.config_path.empty() ? model.model_path : model.config_path;
}

DType TrainConfig::compute_dtype() const {
  const MixedPrecisionArgs& mp = train.accelerator.fsdp_config.mixed_precision;
  return mp.enable && train.precision != "fp32" ? dtype_from_name(mp.param_dtype) : DType::F32;
}

DType TrainConfig::reduce_dtype() const {
  const MixedPrecisionArgs& mp = train.accelerator.fsdp_config.mixed_precision;
  return mp.enable && train.precision != "fp32" ? dtype_from_name(mp.reduce_dtype) : DType::F32;
}

KernelSettings kernel_settings_of(const TrainConfig& config) {
  const TrainArgs& t = config.train;
  return {.attention_backend = t.kernels.attention_backend,
          .gemm_autotune = t.kernels.gemm_autotune,
          .grouped_gemm_loop = t.kernels.grouped_gemm == "loop",
          .debug_checks = t.kernels.debug_checks,
          .profile_ops = t.op_profile.enable,
          .profile_ops_out = t.op_profile.out};
}

int64_t TrainConfig::total_train_steps(int64_t steps_per_epoch) const {
  const int64_t per_epoch = train.max_steps > 0 ? std::min(steps_per_epoch, train.max_steps) : steps_per_epoch;
  return per_epoch * train.num_train_epochs;
}

TrainConfig train_config_from_yaml(std::string_view text, const std::string& source) {
  TrainConfig config;
  train_config_schema().load_yaml(config, text, source);
  return config;
}

TrainConfig load_train_config(const std::string& path) {
  return train_config_from_yaml(read_text_file(path), path);
}

void apply_train_config_overrides(TrainConfig& config, const std::vector<std::string>& args) {
  train_config_schema().apply_overrides(config, args);
}

TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides) {
  TrainConfig config = load_train_config(path);
  apply_train_config_overrides(config, overrides);
  for (const std::string& line : apply_environment_overrides(config)) spdlog::info("environment: {}", line);
  try {
    validate_train_config(config);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}{}: {}", path, overrides.empty() ? "" : " (with command-line overrides)", e.what()));
  }
  return config;
}

// Only the running objective's section is checked: a config may carry the others' defaults or leftovers.
void validate_objective_settings(const TrainArgs& t) {
  if (t.objective == "dpo") t.dpo_config.validate("train.dpo_config");
  if (t.objective == "ppo_actor") t.actor.validate("train.actor");
  if (t.objective == "value") t.critic.validate("train.critic");
}

// A micro-batch packs up to micro_batch_size x max_seq_len tokens into one row whose sequence offsets are 32-bit.
void validate_token_budget(const TrainConfig& c) {
  constexpr int64_t kMaxRowTokens = INT32_MAX;
  check(c.data.max_seq_len <= kMaxRowTokens / c.train.micro_batch_size,
        fmt::format("train.micro_batch_size ({}) x data.max_seq_len ({}) tokens per micro-batch exceed the {} a packed "
                    "row can hold (hint: a smaller data.max_seq_len)",
                    c.train.micro_batch_size, c.data.max_seq_len, kMaxRowTokens));
}

// HF weights of a LoRA run are the adapters merged into the base on disk: a random base has none.
void validate_hf_weights(const TrainConfig& c) {
  check(!(c.train.checkpoint.save_hf_weights && c.model.lora_config.enabled() && c.model.model_path.empty()),
        "train.checkpoint.save_hf_weights merges the LoRA adapters into the base model of model.model_path, which is "
        "empty (a random base) (hint: set save_hf_weights false and export the adapters with veomni-ckpt-merge "
        "--peft)");
}

void validate_train_config(const TrainConfig& config) {
  validate_model_and_data(config);
  validate_hf_weights(config);
  validate_steps_and_batch(config.train);
  validate_token_budget(config);
  validate_optimizer(config.train.optimizer);
  validate_accelerator_and_checkpoint(config.train);
  validate_tower_learning_rates(config.train);
  validate_choices(config);
  check_objective_available(config.train.objective);
  validate_objective_settings(config.train);
}

BatchLayout resolve_batch_layout(const TrainConfig& config, int64_t world_size) {
  const TrainArgs& t = config.train;
  VEOMNI_CHECK(world_size > 0, "world size {}", world_size);
  check(world_size % t.accelerator.ulysses_size == 0,
        fmt::format("the world size ({}) must be a multiple of train.accelerator.ulysses_size ({})", world_size,
                    t.accelerator.ulysses_size));
  check(world_size % t.accelerator.ep_size == 0,
        fmt::format("the world size ({}) must be a multiple of train.accelerator.ep_size ({})", world_size,
                    t.accelerator.ep_size));
  BatchLayout layout;
  layout.dp_size = world_size / t.accelerator.ulysses_size;
  layout.micro_batch_size = t.micro_batch_size;
  const int64_t per_round = t.micro_batch_size * layout.dp_size;
  layout.global_batch_size = t.global_batch_size == -1 ? per_round : t.global_batch_size;
  check(layout.global_batch_size % per_round == 0,
        fmt::format("train.global_batch_size ({}) must be a multiple of train.micro_batch_size ({}) x data-parallel "
                    "size ({} = world size {} / ulysses_size {})",
                    layout.global_batch_size, t.micro_batch_size, layout.dp_size, world_size,
                    t.accelerator.ulysses_size));
  layout.grad_accum_steps = layout.global_batch_size / per_round;
  return layout;
}

void validate_parallel_layout(const TrainConfig& config, const ModelConfig& model) {
  const AcceleratorArgs& a = config.train.accelerator;
  if (a.ep_size > 1) {
    check(model.is_moe(), fmt::format("train.accelerator.ep_size is {} but the model ({}) has no experts", a.ep_size,
                                      model.model_type));
    check(model.num_experts % a.ep_size == 0,
          fmt::format("train.accelerator.ep_size ({}) must divide the number of experts ({})", a.ep_size,
                      model.num_experts));
  }
  check(model.num_attention_heads % a.ulysses_size == 0,
        fmt::format("train.accelerator.ulysses_size ({}) must divide num_attention_heads ({})", a.ulysses_size,
                    model.num_attention_heads));
  check(model.num_key_value_heads % a.ulysses_size == 0 || a.ulysses_size % model.num_key_value_heads == 0,
        fmt::format("train.accelerator.ulysses_size ({}) must divide num_key_value_heads ({}) or be a multiple of it",
                    a.ulysses_size, model.num_key_value_heads));
}

std::string train_config_to_yaml(const TrainConfig& config) { return train_config_schema().to_yaml(config); }

void save_train_config(const TrainConfig& config, const std::string& path) {
  write_file_atomic(path, train_config_to_yaml(config));
}

}  // namespace veomni
