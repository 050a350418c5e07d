// The step loop: plan the global batch, collate this rank's micro-batches, forward/backward, reduce, clip, update.
#include "train/trainer.h"

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint_dir.h"
#include "ckpt/checkpoint_hf_weights.h"
#include "ckpt/checkpoint_reader.h"
#include "ckpt/checkpoint_restore.h"
#include "ckpt/checkpoint_save.h"
#include "ckpt/staged_directory.h"
#include "core/tool.h"
#include "data/batch_plan.h"
#include "data/collator.h"
#include "data/dataset_objective_keys.h"
#include "data/dataset_reader.h"
#include "data/multimodal_collator.h"
#include "dist/device_mesh.h"
#include "dist/nccl_communicator.h"
#include "io/json_file.h"
#include "kernels/backend.h"
#include "kernels/kernel_settings.h"
#include "kernels/op_profiler.h"
#include "kernels/ops.h"
#include "metrics/model_flops.h"
#include "metrics/tensorboard_writer.h"
#include "model/hf_loader.h"
#include "model/model_config.h"
#include "model/weight_source.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"
#include "parallel/expert_parallel.h"
#include "parallel/fsdp.h"
#include "parallel/ulysses.h"
#include "train/batch_prefetch.h"
#include "train/chat_template_check.h"
#include "train/loss_scale.h"
#include "train/metrics_journal.h"
#include "train/metrics_log.h"
#include "train/objective.h"
#include "train/data_coverage.h"
#include "train/epoch_plans.h"
#include "train/evaluator.h"
#include "train/output_dir_lock.h"
#include "train/progress.h"
#include "train/run_setup.h"
#include "train/source_losses.h"
#include "train/train_sources.h"
#include "train/stop_signal.h"
#include "train/train_model.h"

namespace veomni {

namespace {

namespace fs = std::filesystem;

// What one optimizer step produced, reduced over all ranks.
struct StepMetrics {
  double loss = 0, grad_norm = 0, lr = 0;
  ObjectiveMetrics objective;  // the objective's loss and metrics, "loss" first
  int64_t tokens = 0, valid_tokens = 0;
  double sum_squared_seqlens = 0;  // over the step's packed sequences (MFU's attention term)
  double peak_allocated_gib = 0, peak_reserved_gib = 0;  // GPU caching allocator, max over ranks (CUDA only)
  // Where this rank's step time went (seconds), cut at points where the host already waits for the device: reading
  // and collating the micro-batches; forward, backward and gradient reduction up to the gradient norm (a host
  // read); clipping's scale and the optimizer step, finished.
  double data_seconds = 0, compute_seconds = 0, optimizer_seconds = 0;
};

// Σ over the packed sequences of a micro-batch of their squared lengths.
int64_t sum_squared_seqlens(const std::vector<int32_t>& cu_seqlens) {
  int64_t sum = 0;
  for (size_t i = 0; i + 1 < cu_seqlens.size(); ++i) {
    const int64_t length = cu_seqlens[i + 1] - cu_seqlens[i];
    sum += length * length;
  }
  return sum;
}

double seconds_since(std::chrono::steady_clock::time_point& mark) {
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - mark).count();
  mark = now;
  return seconds;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// shard_slots_ entry of a frozen shard: it has no optimizer state.
constexpr size_t kNoSlot = SIZE_MAX;

bool any_frozen_parameter(ParamStore& params) {
  for (const auto& p : params.all())
    if (!p->trainable) return true;
  return false;
}

// VEOMNI_FAULT_INJECT="rank=R,step=S[,kill=step|save|commit|term]": the failure-path tests make one rank fail
// (throw), die (SIGKILL) at a chosen point while the others wait, or receive SIGTERM at a step's start (term).
struct FaultInjection {
  int64_t rank = -1;
  int64_t step = -1;
  std::string kill;  // "" = throw at the step's start

  static std::optional<FaultInjection> from_environment() {
    const char* spec = std::getenv("VEOMNI_FAULT_INJECT");
    if (!spec) return std::nullopt;
    long long rank = -1, step = -1;
    char kill[16] = "";
    const int fields = std::sscanf(spec, "rank=%lld,step=%lld,kill=%15s", &rank, &step, kill);
    const bool known_kill = fields == 2 || std::strcmp(kill, "step") == 0 || std::strcmp(kill, "save") == 0 ||
                            std::strcmp(kill, "commit") == 0 || std::strcmp(kill, "term") == 0;
    VEOMNI_INPUT_CHECK(fields >= 2 && known_kill,
                       "VEOMNI_FAULT_INJECT='{}' is not of the form rank=R,step=S[,kill=step|save|commit|term]", spec);
    return FaultInjection{rank, step, fields == 3 ? kill : ""};
  }
  bool hits(int64_t my_rank, int64_t at_step, const char* point) const {
    return rank == my_rank && step == at_step && kill == point;
  }
};

[[noreturn]] void kill_self(int64_t rank, int64_t step, const std::string& point) {
  std::fprintf(stderr, "veomni-train: rank %lld kills itself (SIGKILL) at step %lld, %s (VEOMNI_FAULT_INJECT)\n",
               static_cast<long long>(rank), static_cast<long long>(step), point.c_str());
  std::fflush(stderr);
  std::raise(SIGKILL);
  std::abort();
}

// One AdamW per learning-rate group (VeOmni's param groups: the LM, the vision tower at vit_lr, the audio encoder
// at audio_lr); frozen parameters sit in a group that never steps, so their values stay exact and their (zero)
// moments still go into checkpoints.
// The global gradient norm and the factor the optimizer applies to every gradient (1: no clipping).
struct GradientClip {
  double norm = 0.0;
  float grad_scale = 1.0f;
};

struct OptimizerGroup {
  std::string name;
  double peak_lr = 0;   // the schedule's value scaled by peak_lr / train.optimizer.lr
  bool frozen = false;
  std::unique_ptr<AdamW> adamw;
};

class Trainer {
 public:
  Trainer(const TrainConfig& config, std::shared_ptr<Communicator> world)
      : config_(config), world_(std::move(world)), fault_(FaultInjection::from_environment()) {}

  TrainSummary run();

 private:
  Device select_device();
  void build_mesh_and_model();
  void build_data();
  void build_objective();
  void build_evaluator();
  std::unique_ptr<TrainModel> make_model(const ModelOptions& options, ModelHead head) const;
  void load_start_weights(TrainModel& model) const;
  void load_lora_base();
  void check_adapter_checkpoint(const CheckpointMetadata& saved) const;
  void report_untrained_data();
  void refuse_long_pairs() const;
  void build_optimizer();
  void log_trainable_parameters(double frozen_bytes, double frozen_bytes_max) const;
  std::string offload_memory_note() const;
  std::vector<MultimodalBatch> collate_my_micro_batches(const StepPlan& step);
  MultimodalBatch collate_samples(const std::vector<Sample>& samples, const std::vector<std::string>& contexts) const;
  MultimodalBatch collate_micro_batch(const std::vector<int64_t>& sample_indices);
  std::vector<MultimodalBatch::SourceSpan> source_spans_of(const std::vector<int64_t>& sample_indices) const;
  OptimizerGroup& optimizer_group_of(const Parameter& p);
  void step_optimizers(double lr, float grad_scale);
  // next: the following step of the epoch, whose batches prefetch collates while this step computes (null: none).
  StepMetrics run_step(const StepPlan& step, int64_t global_step, const StepPlan* next, BatchPrefetch& prefetch);
  GradientClip clip_gradients();
  void log_step(int64_t step, const StepMetrics& m, double seconds, ProgressClock& clock);
  double step_mfu(const StepMetrics& m, double seconds) const;
  double mfu_peak_flops() const;
  bool evaluation_due(int64_t step, bool last) const;
  EvalMetrics run_evaluation(int64_t step, const std::string& metrics_path);
  void write_step_metrics(const MetricsLogFile& file, int64_t step, bool rewrite) const;
  void drop_source_metrics(EvalMetrics& eval) const;
  void write_summary(const TrainSummary& summary, const std::string& path) const;
  void maybe_inject_fault(int64_t step) const;
  void measure_gpu_memory(StepMetrics& m);

  // Checkpoints (ckpt/): what this rank saves and restores, resuming, saving.
  std::optional<std::string> agree_on_resume_checkpoint();
  std::vector<ParamShardState> shard_states();
  DataPlanInfo data_plan_info() const;
  void resume_from(const std::string& dir);
  void warn_about_changed_run(const CheckpointMetadata& saved) const;
  void check_optimizer_type(const std::string& dir, const CheckpointMetadata& saved) const;
  void check_resume_position(const std::string& dir, const CheckpointMetadata& saved) const;
  void normalise_start_position();
  int agree_on_stop_signal();
  std::string save_checkpoint_at(int64_t global_step, int64_t epoch, int64_t next_step_in_epoch, double last_lr);
  bool hf_weights_due(int64_t step, bool last) const;

  TrainConfig config_;
  std::shared_ptr<Communicator> world_;
  std::optional<FaultInjection> fault_;
  std::optional<std::string> resume_dir_;  // the checkpoint this run resumes from
  TrainingPosition start_;                 // where this invocation starts (all zero for a fresh run)
  Device device_;
  DeviceMesh mesh_;
  BatchLayout layout_;
  ModelConfig model_config_;
  std::unique_ptr<UlyssesHooks> ulysses_;
  std::unique_ptr<ExpertParallel> expert_parallel_;
  std::optional<ThinkerConfig> thinker_;  // set for a multimodal model; model_config_ is then its text model
  std::string hf_config_json_;            // a multimodal model's config.json, kept in checkpoints
  std::unique_ptr<TrainModel> model_;
  std::unique_ptr<Objective> objective_;
  ModelOptions model_options_;
  // DPO's frozen reference model (the start weights, sharded like the policy) and its FSDP; null when the data
  // carry the reference log-probs or reference_free needs none.
  std::unique_ptr<TrainModel> reference_;
  std::unique_ptr<Fsdp> reference_fsdp_;
  std::unique_ptr<Fsdp> fsdp_;
  // LoRA: the settings and the frozen base saved in adapter checkpoints (the base's identity on rank 0 only).
  std::optional<AdapterCheckpointInfo> adapter_;
  std::vector<OptimizerGroup> optimizers_;   // LM first
  // The (group, slot) of each FSDP shard, in shard order; kNoSlot for a frozen shard (no optimizer state).
  std::vector<std::pair<size_t, size_t>> shard_slots_;
  std::vector<bool> shard_frozen_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<TrainSources> sources_;  // data.train_path, or data.datasets' sources
  ChatTemplateExpectation chat_template_;   // data.chat_template, resolved
  const DatasetReader* dataset_ = nullptr;  // the first source: its keys are every source's
  BatchPlanOptions plan_options_;
  std::unique_ptr<EpochPlans> plans_;
  std::unique_ptr<Evaluator> evaluator_;  // data.eval_path's; null without one
  std::unique_ptr<OutputDirLock> output_lock_;  // rank 0's, held for the whole run
  int64_t total_steps_ = 0;
  double state_bytes_max_ = 0;
  double peak_gpu_bytes_ = 0;  // max over steps and ranks of the caching allocator's peak
  MetricsLog metrics_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // rank 0's, when train.use_tensorboard
  double peak_flops_per_gpu_ = 0;                   // bf16 peak of this GPU; 0: MFU is not reported
};

// One GPU per process, chosen by the process's rank on its node (as torchrun's LOCAL_RANK).
Device Trainer::select_device() { return select_run_device(config_.train.device, *world_, "veomni-train"); }

void Trainer::build_mesh_and_model() {
  RunModelConfig run_model = read_run_model_config(config_.resolved_model_config_path());
  model_config_ = run_model.text;
  thinker_ = std::move(run_model.thinker);
  hf_config_json_ = std::move(run_model.hf_config_json);
  layout_ = resolve_batch_layout(config_, world_->size());
  validate_parallel_layout(config_, model_config_);
  device_ = select_device();
  const auto& acc = config_.train.accelerator;
  RunParallel parallel = build_run_parallel(world_, acc, model_config_, device_);
  mesh_ = parallel.mesh;
  spdlog::info("mesh: {}; global batch {} = {} micro-batches of up to {} tokens", mesh_.shape.describe(),
               layout_.global_batch_size, layout_.global_batch_size / layout_.micro_batch_size,
               layout_.micro_batch_size * config_.data.max_seq_len);

  ModelOptions options = run_model_options(config_, device_, parallel);
  const DType reduce_dtype = device_.is_cpu() ? DType::F32 : config_.reduce_dtype();
  spdlog::info("device: {}, compute {}, gradient reduction {}, master weights float32, AdamW moments {}{}",
               device_.str(), dtype_name(options.compute_dtype), dtype_name(reduce_dtype),
               dtype_name(moment_dtype_of_optimizer(config_.train.optimizer.type)),
               acc.fsdp_config.offload ? " in host memory, stepped on the CPU (offload)" : "");
  ulysses_ = std::move(parallel.ulysses);
  expert_parallel_ = std::move(parallel.expert_parallel);
  model_options_ = options;
  model_ = make_model(options, model_head_for_objective(config_.train.objective));
  const std::string model_type = thinker_ ? thinker_->model_type : model_config_.model_type;
  if (config_.model.lora_config.enabled()) {
    load_lora_base();
  } else if (resume_dir_) {
    // The checkpoint overwrites every master and moment once FSDP and AdamW exist: no init, no HF read.
    spdlog::info("model: {} with {} parameters, from checkpoint {}", model_type,
                 format_count(static_cast<double>(model_->params().num_elements())), *resume_dir_);
  } else {
    load_start_weights(*model_);
    spdlog::info("model: {} with {} parameters, {}", model_type,
                 format_count(static_cast<double>(model_->params().num_elements())),
                 config_.model.model_path.empty() ? fmt::format("random init (seed {})", config_.train.seed)
                                                  : "from " + config_.model.model_path);
  }
  fsdp_ = std::make_unique<Fsdp>(model_->params(), mesh_, options.compute_dtype, reduce_dtype, acc.fsdp_config.overlap,
                                 acc.fsdp_config.offload);
  model_->set_param_hooks(fsdp_.get());
}

// LoRA: the frozen base comes from model.model_path (or the random initialisation) also when resuming, since an
// adapter checkpoint holds only the trainable parameters; the checkpoint then overwrites them. A resumed base must be
// the one the adapters were trained on (rank 0 compares checksums of its weight files; a random base reuses the
// checkpoint's seed).
void Trainer::load_lora_base() {
  const LoraConfig& lora = config_.model.lora_config;
  VEOMNI_INPUT_CHECK(any_frozen_parameter(model_->params()),
                     "model.lora_config.rank {}: this model has no LoRA adapters (every parameter trains) (hint: rank 0 "
                     "for full fine-tuning)",
                     lora.rank);
  int64_t seed = config_.train.seed;
  std::optional<CheckpointMetadata> saved;
  if (resume_dir_) {
    saved = read_checkpoint_metadata(*resume_dir_);
    check_adapter_checkpoint(*saved);
    if (saved->adapter->base.random_init()) seed = saved->adapter->base.seed;
  }
  veomni::load_start_weights(*model_, config_.model.model_path, static_cast<uint64_t>(seed));
  if (world_->rank() == 0) {
    adapter_ = AdapterCheckpointInfo{lora, identify_base_model(config_.model.model_path, seed)};
    if (saved) check_same_base_model(saved->adapter->base, adapter_->base, *resume_dir_);
  } else {
    adapter_ = AdapterCheckpointInfo{lora, {}};  // rank 0 alone writes metadata.json
  }
  spdlog::info("model: LoRA rank {} (alpha {:g}) on the frozen base {}{}", lora.rank, lora.alpha,
               config_.model.model_path.empty() ? fmt::format("random init (seed {})", seed)
                                                : "from " + config_.model.model_path,
               resume_dir_ ? "; adapters from checkpoint " + *resume_dir_ : std::string());
}

// An adapter checkpoint resumes a LoRA run with the same LoRA settings; a whole model's checkpoint does not.
void Trainer::check_adapter_checkpoint(const CheckpointMetadata& saved) const {
  const std::string file = (fs::path(*resume_dir_) / kCheckpointMetadataFile).string();
  VEOMNI_INPUT_CHECK(saved.adapter.has_value(),
                     "{}: a whole model's checkpoint (no key 'lora') but this run trains LoRA adapters "
                     "(model.lora_config.rank {}) (hint: merge it with veomni-ckpt-merge and name the result in "
                     "model.model_path, without train.checkpoint.load_path)",
                     file, config_.model.lora_config.rank);
  const LoraConfig& was = saved.adapter->lora;
  const LoraConfig& is = config_.model.lora_config;
  VEOMNI_INPUT_CHECK(was == is,
                     "{}: the adapters were trained with model.lora_config rank {}, alpha {:g}, use_rslora {}, "
                     "lora_modules [{}], exclude_modules '{}', share_expert_lora {}; this run sets rank {}, alpha {:g}, "
                     "use_rslora {}, lora_modules [{}], exclude_modules '{}', share_expert_lora {} (hint: resume with "
                     "the checkpoint's settings)",
                     file, was.rank, was.alpha, was.use_rslora, fmt::join(was.lora_modules, ", "), was.exclude_modules,
                     was.share_expert_lora, is.rank, is.alpha, is.use_rslora, fmt::join(is.lora_modules, ", "),
                     is.exclude_modules, is.share_expert_lora);
}

// Deferred: FSDP builds each rank's shards from the initialised or loaded start values, so that a rank's host memory
// holds its share of the model, never the whole of it.
std::unique_ptr<TrainModel> Trainer::make_model(const ModelOptions& options, ModelHead head) const {
  return make_run_model({model_config_, thinker_, hf_config_json_}, options, head, config_.train.freeze_vit,
                        RunModelValues::Deferred);
}

void Trainer::load_start_weights(TrainModel& model) const {
  veomni::load_start_weights(model, config_.model.model_path, static_cast<uint64_t>(config_.train.seed));
}

// The objective and what it needs from the data; DPO's reference model when the data carry no reference log-probs.
void Trainer::build_objective() {
  const TrainArgs& t = config_.train;
  ObjectiveSettings settings{t.objective, t.dpo_config, t.actor, t.critic};
  if (sources_->mixed() && t.objective == "sft")
    for (size_t s = 0; s < sources_->size(); ++s) settings.source_names.push_back(sources_->spec(s).name);
  else if (sources_->mixed())
    spdlog::warn("data.datasets: the per-source loss (loss_<name>) is reported for train.objective sft only; this {} "
                 "run logs the mix's metrics as a whole",
                 t.objective);
  const std::string purpose = "train.objective " + t.objective;
  if (t.objective == "dpo" || t.objective == "reward") require_dataset_keys(*dataset_, {kChosenLengthKey}, purpose);
  if (t.objective == "value") require_dataset_keys(*dataset_, {"returns", "old_values"}, purpose);
  if (t.objective == "ppo_actor") {
    require_dataset_keys(*dataset_, {"old_log_probs", "advantages"}, purpose);
    if (t.actor.use_kl_loss) require_dataset_keys(*dataset_, {"ref_log_probs"}, "train.actor.use_kl_loss");
  }
  const bool data_has_reference = dataset_->has_key(kRefChosenLogpsKey) && dataset_->has_key(kRefRejectedLogpsKey);
  if (t.objective == "dpo" && !data_has_reference && !t.dpo_config.reference_free && adapter_) {
    // LoRA: the reference is the frozen base, i.e. the policy itself with its adapters off: no second model.
    spdlog::info("dpo: reference model = the frozen base (the policy with its LoRA adapters disabled)");
    objective_ = make_objective(settings, model_config_, model_.get());
    return;
  }
  if (t.objective == "dpo" && !data_has_reference && !t.dpo_config.reference_free) {
    ModelOptions options = model_options_;
    // A float32 run (the CPU, train.precision fp32, mixed precision off) keeps its reference in float32 too.
    if (model_options_.compute_dtype != DType::F32)
      options.compute_dtype = t.dpo_config.refer_model_precision == "float32" ? DType::F32 : DType::BF16;
    reference_ = make_model(options, ModelHead::LanguageModel);
    load_start_weights(*reference_);
    // Never stepped: held as a LoRA base is, in its compute dtype only (no float32 master, no gradient buffer).
    for (const auto& p : reference_->params().all()) p->trainable = false;
    reference_fsdp_ = std::make_unique<Fsdp>(reference_->params(), mesh_, options.compute_dtype, DType::F32,
                                             t.accelerator.fsdp_config.overlap);
    reference_->set_param_hooks(reference_fsdp_.get());
    spdlog::info("dpo: reference model = the start weights, frozen, computing in {}",
                 dtype_name(options.compute_dtype));
  } else if (t.objective == "dpo") {
    spdlog::info("dpo: reference log-probs {}", data_has_reference ? "from the dataset" : "none (reference_free)");
  }
  objective_ = make_objective(settings, model_config_, reference_.get());
}

void Trainer::build_data() {
  VEOMNI_INPUT_CHECK(!config_.data.train_path.empty() || !config_.data.datasets.empty(),
                     "data.train_path is not set (hint: --data.train_path PATH)");
  sources_ = std::make_unique<TrainSources>(config_.data);
  dataset_ = &sources_->first();
  chat_template_ = expected_chat_template(config_);
  for (size_t s = 0; s < sources_->size(); ++s) {
    const std::string key = !sources_->mixed()           ? std::string("data.train_path")
                            : config_.data.datasets.empty() ? fmt::format("data.train_path source {}", s)
                                                            : fmt::format("data.datasets[{}]", s);
    check_dataset_chat_template(chat_template_, key, sources_->spec(s).path, sources_->reader(s).info());
  }

  plan_options_.max_seq_len = config_.data.max_seq_len;
  plan_options_.token_budget = config_.train.micro_batch_size * config_.data.max_seq_len;
  plan_options_.micro_batches_per_step = layout_.global_batch_size / layout_.micro_batch_size;
  plan_options_.shuffle = config_.data.dataloader.shuffle;
  plan_options_.seed = static_cast<uint64_t>(config_.train.seed);
  plans_ = std::make_unique<EpochPlans>(sources_->lengths(), plan_options_, config_.train.num_train_epochs,
                                        config_.train.max_steps, sources_->mix());
  total_steps_ = plans_->total_steps();
  VEOMNI_INPUT_CHECK(total_steps_ > 0,
                     "{}: {} samples do not fill one global batch of {} micro-batches of up to {} tokens "
                     "(hint: lower train.global_batch_size or add data)",
                     sources_->describe(), sources_->num_samples(), plan_options_.micro_batches_per_step,
                     plan_options_.token_budget);
  spdlog::info("data: {} samples from {}; {} steps over {} epoch(s){}", sources_->num_samples(), sources_->describe(),
               total_steps_, config_.train.num_train_epochs,
               sources_->mixed() ? fmt::format(" of {} drawn samples", mixed_epoch_draws(sources_->mix())) : "");
  refuse_long_pairs();
  if (world_->rank() == 0) report_untrained_data();
}

void Trainer::build_evaluator() {
  if (config_.data.eval_path.empty()) return;
  EvalOptions options{config_.data.eval_path, config_.data.max_seq_len, plan_options_.token_budget,
                      config_.train.eval_batches};
  evaluator_ = std::make_unique<Evaluator>(options, *dataset_, config_.data.train_path);
  check_dataset_chat_template(chat_template_, "data.eval_path", config_.data.eval_path, evaluator_->dataset().info());
  const int64_t every = config_.train.eval_steps;
  spdlog::info("eval: {} micro-batches from {}, {}", evaluator_->num_micro_batches(), config_.data.eval_path,
               every > 0 ? fmt::format("every {} steps and at the end", every) : std::string("at the end"));
}

// A preference pair cannot be truncated (the collator refuses it): say so before the first step, not when the pair's
// step comes, hours into the run.
void Trainer::refuse_long_pairs() const {
  if (!dataset_->has_key(kChosenLengthKey)) return;
  int64_t longer = 0, first = -1;
  for (int64_t i = 0; i < sources_->num_samples(); ++i)
    if (sources_->sequence_length(i) > config_.data.max_seq_len) {
      if (first < 0) first = i;
      ++longer;
    }
  VEOMNI_INPUT_CHECK(longer == 0,
                     "{}: {} preference pair(s) are longer than data.max_seq_len {}, the first sample {} ({} tokens); "
                     "a pair cannot be truncated (hint: raise data.max_seq_len, or leave such pairs out with "
                     "veomni-preprocess preference --max-seq-len)",
                     first < 0 ? "" : sources_->spec(sources_->source_of(first)).path, longer,
                     config_.data.max_seq_len, first < 0 ? 0 : sources_->local_index(first),
                     first < 0 ? 0 : sources_->sequence_length(first));
}

// Data the run will not learn from, said at start-up: truncation over the whole dataset; label tokens over the
// samples of the first epoch's steps (text data: the multimodal collator decides its targets itself).
void Trainer::report_untrained_data() {
  std::vector<std::vector<int64_t>> trained(sources_->size());  // per source, its own sample indices
  if (!thinker_)
    for (const StepPlan& step : plans_->epoch(0))
      for (const MicroBatchPlan& micro_batch : step.micro_batches)
        for (int64_t index : micro_batch.samples)
          trained[sources_->source_of(index)].push_back(sources_->local_index(index));
  for (size_t s = 0; s < sources_->size(); ++s)
    report_data_coverage(measure_data_coverage(sources_->reader(s), trained[s], config_.data.max_seq_len),
                         sources_->spec(s).path, config_.data.max_seq_len);
}

void Trainer::build_optimizer() {
  const auto& o = config_.train.optimizer;
  VEOMNI_INPUT_CHECK(o.betas.size() == 2, "train.optimizer.betas needs two values, got {}", o.betas.size());
  AdamWOptions adam;
  adam.lr = o.lr;
  adam.beta1 = o.betas[0];
  adam.beta2 = o.betas[1];
  adam.eps = o.eps;
  adam.weight_decay = o.weight_decay;
  adam.decay_rule = {o.no_decay_modules, o.no_decay_params};
  adam.moment_dtype = moment_dtype_of_optimizer(o.type);
  if (adam.decay_rule != WeightDecayRule()) {  // the default need not match (a model without biases)
    std::vector<std::string> names;
    for (const auto& p : model_->params().all()) names.push_back(p->name);
    adam.decay_rule.check_matches(names);
  }
  const auto& t = config_.train;
  auto add_group = [&](const std::string& name, double peak_lr, bool frozen) {
    optimizers_.push_back({name, peak_lr, frozen, std::make_unique<AdamW>(adam)});
  };
  add_group("language model", o.lr, false);
  if (thinker_) {
    add_group("vision tower", t.vit_lr, false);
    if (thinker_->has_audio) add_group("audio encoder", t.audio_lr < 0 ? o.lr : t.audio_lr, false);
    add_group("frozen", 0.0, true);
  }
  for (ParamShard& s : fsdp_->shards()) {
    if (s.frozen()) {  // held in the compute dtype only: no master, gradient or moments
      shard_slots_.emplace_back(kNoSlot, kNoSlot);
      shard_frozen_.push_back(true);
      continue;
    }
    OptimizerGroup& group = optimizer_group_of(*s.param);
    group.adamw->add_slot(s.param->name, s.master, &s.grad, fsdp_->optimizer_target(s));
    shard_slots_.emplace_back(static_cast<size_t>(&group - optimizers_.data()), group.adamw->slots().size() - 1);
    shard_frozen_.push_back(group.frozen);
  }
  for (const OptimizerGroup& g : optimizers_)
    if (thinker_ && !g.adamw->slots().empty())
      spdlog::info("optimizer: {} parameter tensors in the {} group{}", g.adamw->slots().size(), g.name,
                   g.frozen ? " (not updated)" : fmt::format(" (peak lr {:g})", g.peak_lr));

  LrScheduleOptions sched;
  sched.lr = o.lr;
  sched.lr_min = o.lr_min;
  sched.warmup_ratio = o.lr_warmup_ratio;
  sched.decay_style = o.lr_decay_style;
  sched.total_steps = total_steps_;
  schedule_ = std::make_unique<LrSchedule>(sched);

  // Persistent per-rank state: master + grad (+ compute copy) (Fsdp) + two AdamW moments: 16 bytes per trainable
  // local element with f32 moments, 12 with bf16 (+2 for a 16-bit compute copy); the frozen shards' compute-dtype
  // slices.
  const double frozen_bytes = static_cast<double>(fsdp_->frozen_shard_bytes());
  int64_t moments = 0;
  for (const OptimizerGroup& g : optimizers_) moments += g.adamw->moment_bytes();
  const double bytes = static_cast<double>(fsdp_->shard_bytes() + moments);
  std::vector<double> all{bytes, frozen_bytes};
  world_->allreduce_max(all);
  state_bytes_max_ = all[0];
  spdlog::info("memory: parameters + gradients + optimizer state {} bytes on this rank (max over ranks {}){}",
               format_count(bytes), format_count(all[0]), offload_memory_note());
  if (adapter_) log_trainable_parameters(frozen_bytes, all[1]);
}

// Offload: what of the state is in host memory (masters, moments, the stream's ring) and what stays on the device.
std::string Trainer::offload_memory_note() const {
  if (!fsdp_->offload()) return "";
  int64_t host = fsdp_->offload_host_bytes();
  for (const OptimizerGroup& g : optimizers_) host += g.adamw->moment_bytes();
  const int64_t buffers = fsdp_->offload_buffer_bytes();
  return fmt::format("; offload: float32 masters and {} moments {} bytes in host memory and {} bytes of transfer "
                     "buffers there, the gradients on {}",
                     dtype_name(moment_dtype_of_optimizer(config_.train.optimizer.type)),
                     format_count(static_cast<double>(host - buffers)), format_count(static_cast<double>(buffers)),
                     device_.str());
}

// LoRA: how much of the model trains, and what the frozen base costs each rank.
void Trainer::log_trainable_parameters(double frozen_bytes, double frozen_bytes_max) const {
  int64_t trainable = 0, total = 0, tensors = 0;
  for (const auto& p : model_->params().all()) {
    const int64_t n = shape_numel(p->shape);
    total += n;
    if (p->trainable) {
      trainable += n;
      ++tensors;
    }
  }
  spdlog::info("LoRA: {} trainable parameters in {} tensors, {:.4f}% of {}; frozen base {} bytes on this rank (max "
               "over ranks {}), in {}",
               format_count(static_cast<double>(trainable)), tensors,
               100.0 * static_cast<double>(trainable) / static_cast<double>(std::max<int64_t>(total, 1)),
               format_count(static_cast<double>(total)), format_count(frozen_bytes), format_count(frozen_bytes_max),
               dtype_name(model_options_.compute_dtype));
}

OptimizerGroup& Trainer::optimizer_group_of(const Parameter& p) {
  if (!thinker_) return optimizers_.front();
  const auto& t = config_.train;
  if (param_frozen(p.name, thinker_->model_type, t.freeze_vit, t.freeze_audio_tower)) return optimizers_.back();
  switch (param_role(p.name)) {
    case ParamRole::Vision: return optimizers_[1];
    case ParamRole::Audio: return thinker_->has_audio ? optimizers_[2] : optimizers_.front();
    case ParamRole::LanguageModel: break;
  }
  return optimizers_.front();
}

// Every group follows the one schedule, scaled to its peak learning rate (as torch's LambdaLR scales each group).
void Trainer::step_optimizers(double lr, float grad_scale) {
  const double base = config_.train.optimizer.lr;
  for (OptimizerGroup& g : optimizers_)
    if (!g.frozen && !g.adamw->slots().empty()) g.adamw->step(lr * g.peak_lr / base, grad_scale);
}

// Packs one micro-batch's samples (contexts name each in errors) as the run's model takes them.
MultimodalBatch Trainer::collate_samples(const std::vector<Sample>& samples,
                                         const std::vector<std::string>& contexts) const {
  if (thinker_) {
    const MultimodalCollateOptions collate =
        run_multimodal_collate_options(*thinker_, config_.data.max_seq_len, mesh_);
    std::vector<NamedSample> named;
    for (size_t k = 0; k < samples.size(); ++k) named.push_back({&samples[k], contexts[k]});
    return collate_multimodal(named, collate);
  }
  CollateOptions collate;
  collate.max_seq_len = config_.data.max_seq_len;
  collate.sp_size = mesh_.shape.ulysses;
  collate.vocab_size = model_config_.vocab_size;
  std::vector<TokenSample> tokens;
  for (size_t k = 0; k < samples.size(); ++k) tokens.push_back(token_sample_from(samples[k], contexts[k]));
  MultimodalBatch batch;
  batch.text = slice_for_sp_rank(pack_samples(tokens, collate), mesh_.shape.ulysses, mesh_.sp_rank());
  return batch;
}

// A training micro-batch: its samples from the sources, and (a mixed run) which source each row span came from.
MultimodalBatch Trainer::collate_micro_batch(const std::vector<int64_t>& sample_indices) {
  std::vector<Sample> samples;
  std::vector<std::string> contexts;
  for (int64_t index : sample_indices) {
    samples.push_back(sources_->read(index));
    contexts.push_back(sources_->context(index));
  }
  MultimodalBatch batch = collate_samples(samples, contexts);
  batch.source_spans = source_spans_of(sample_indices);
  return batch;
}

// Samples are packed in order, each truncated to data.max_seq_len (the collator's rule): their rows in the packed row.
std::vector<MultimodalBatch::SourceSpan> Trainer::source_spans_of(const std::vector<int64_t>& sample_indices) const {
  std::vector<MultimodalBatch::SourceSpan> spans;
  if (!sources_->mixed()) return spans;
  int64_t at = 0;
  for (int64_t index : sample_indices) {
    const int64_t length = std::min(sources_->sequence_length(index), config_.data.max_seq_len);
    spans.push_back({at, at + length, static_cast<int32_t>(sources_->source_of(index))});
    at += length;
  }
  return spans;
}

std::vector<MultimodalBatch> Trainer::collate_my_micro_batches(const StepPlan& step) {
  std::vector<MultimodalBatch> mine;
  const auto dp = static_cast<size_t>(mesh_.shape.dp());
  for (size_t i = static_cast<size_t>(mesh_.dp_rank()); i < step.micro_batches.size(); i += dp)
    mine.push_back(collate_micro_batch(step.micro_batches[i].samples));
  return mine;
}

GradientClip Trainer::clip_gradients() {
  // Frozen parameters are not part of the norm (torch clips the parameters that have gradients). One pass over every
  // gradient and one host read, not one per parameter.
  std::vector<ParamShard>& shards = fsdp_->shards();
  std::vector<const Tensor*> grads;
  for (size_t i = 0; i < shards.size(); ++i)
    if (!shard_frozen_[i] && shards[i].grad.numel() > 0) grads.push_back(&shards[i].grad);
  std::vector<double> total{ops::sum_squares_multi_as_on(grads, device_)};
  world_->allreduce_sum(total);
  GradientClip clip;
  clip.norm = std::sqrt(total[0]);
  const double max_norm = config_.train.optimizer.max_grad_norm;
  // torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below one. The optimizer applies
  // the factor as it reads each gradient (the same f32 product that scaling the gradients first would give).
  if (max_norm > 0 && std::isfinite(clip.norm)) {
    const double coef = max_norm / (clip.norm + 1e-6);
    if (coef < 1.0) clip.grad_scale = static_cast<float>(coef);
  }
  return clip;
}

void Trainer::maybe_inject_fault(int64_t step) const {
  if (!fault_) return;
  if (fault_->hits(world_->rank(), step, ""))
    throw Error(fmt::format("injected fault at step {} (VEOMNI_FAULT_INJECT)", step));
  if (fault_->hits(world_->rank(), step, "step")) kill_self(world_->rank(), step, "at the step's start");
  if (fault_->hits(world_->rank(), step, "term")) std::raise(SIGTERM);
}

// Rank 0 decides (it alone cleans up and writes `latest`); the others follow, so all resume the same checkpoint.
std::optional<std::string> Trainer::agree_on_resume_checkpoint() {
  std::string dir;
  if (world_->rank() == 0)
    dir = find_resume_checkpoint(config_.train.checkpoint.load_path, config_.train.checkpoint.output_dir).value_or("");
  world_->broadcast(dir, 0);
  if (dir.empty()) {
    if (config_.train.checkpoint.load_path == kAutoResume)
      spdlog::info("checkpoint: nothing to resume under {} (load_path auto): starting fresh",
                   checkpoints_dir(config_.train.checkpoint.output_dir));
    return std::nullopt;
  }
  return dir;
}

// FSDP shards and AdamW slots were created in the same parameter order. The trainable shards only: with LoRA the
// frozen base is reloaded from model.model_path.
std::vector<ParamShardState> Trainer::shard_states() {
  std::vector<ParamShardState> states;
  std::vector<ParamShard>& shards = fsdp_->shards();
  VEOMNI_CHECK(shards.size() == shard_slots_.size(), "{} FSDP shards but {} optimizer slots", shards.size(),
               shard_slots_.size());
  for (size_t i = 0; i < shards.size(); ++i) {
    const Parameter& p = *shards[i].param;
    const auto [group, index] = shard_slots_[i];
    if (shards[i].frozen()) continue;  // the base under LoRA: named in the metadata, not stored
    const OptimizerSlot& slot = optimizers_[group].adamw->slots()[index];
    VEOMNI_CHECK(slot.name == p.name, "optimizer slot {} is '{}', FSDP shard '{}'", i, slot.name, p.name);
    states.push_back({p.name, p.shape, p.is_expert, shards[i].master, slot.exp_avg, slot.exp_avg_sq});
  }
  return states;
}

DataPlanInfo Trainer::data_plan_info() const {
  DataPlanInfo info{config_.data.train_path,    sources_->num_samples(), plan_options_.micro_batches_per_step,
                    plan_options_.token_budget, plan_options_.max_seq_len,   plan_options_.shuffle};
  if (sources_->mixed())
    for (size_t s = 0; s < sources_->size(); ++s)
      info.sources.push_back({sources_->spec(s).path, sources_->spec(s).name, sources_->spec(s).weight,
                              sources_->reader(s).num_samples()});
  return info;
}

void Trainer::resume_from(const std::string& dir) {
  const CheckpointReader reader(dir);
  const CheckpointMetadata& saved = reader.metadata();
  VEOMNI_INPUT_CHECK(!saved.adapter || adapter_,
                     "{}: an adapter (LoRA rank {}) checkpoint, which holds the adapters only, but this run trains the "
                     "whole model (hint: resume with the checkpoint's model.lora_config)",
                     (fs::path(dir) / kCheckpointMetadataFile).string(), saved.adapter ? saved.adapter->lora.rank : 0);
  check_optimizer_type(dir, saved);
  std::vector<ParamShardState> states = shard_states();
  check_checkpoint_model(reader, model_config_, model_->head(), states);
  check_resume_position(dir, saved);
  restore_param_shards(reader, mesh_.shape, mesh_.rank, states);
  fsdp_->masters_updated();
  start_ = saved.position;
  for (OptimizerGroup& g : optimizers_) g.adamw->set_steps_taken(start_.optimizer_steps);
  metrics_ = reader.metrics();
  VEOMNI_INPUT_CHECK(metrics_.num_steps() == 0 || static_cast<int64_t>(metrics_.num_steps()) == start_.global_step,
                     "{}: its metrics log has {} steps, the checkpoint is at step {}", dir, metrics_.num_steps(),
                     start_.global_step);
  warn_about_changed_run(saved);
  normalise_start_position();
  spdlog::info("checkpoint: resumed from {} at step {} (epoch {}, step {} of it); saved under {}, now {}", dir,
               start_.global_step, start_.epoch, start_.step_in_epoch, saved.mesh.describe(), mesh_.shape.describe());
}

// The moments are resumed as they were saved: a checkpoint of one optimizer type does not resume under the other
// (its moments would silently change precision). Before the first step the moments are zeros in either dtype.
void Trainer::check_optimizer_type(const std::string& dir, const CheckpointMetadata& saved) const {
  const std::string& type = config_.train.optimizer.type;
  if (saved.optimizer_type == type || saved.position.optimizer_steps == 0) return;
  throw InputError(fmt::format(
      "{}: the checkpoint holds {} moments of train.optimizer.type {}, but this run has train.optimizer.type {} "
      "({} moments); resume with --train.optimizer.type {}",
      (fs::path(dir) / kCheckpointMetadataFile).string(),
      dtype_name(moment_dtype_of_optimizer(saved.optimizer_type)), saved.optimizer_type, type,
      dtype_name(moment_dtype_of_optimizer(type)), saved.optimizer_type));
}

// Resuming with other data, batch or seed settings is allowed, but the saved position then means other samples.
void Trainer::warn_about_changed_run(const CheckpointMetadata& saved) const {
  if (saved.data_plan && *saved.data_plan != data_plan_info())
    spdlog::warn("checkpoint: the batch plan differs from the checkpoint's (data.train_path or data.datasets, their "
                 "samples, train.global_batch_size / micro_batch_size or data.max_seq_len changed): epoch {} step {} "
                 "now means other samples",
                 start_.epoch, start_.step_in_epoch);
  if (saved.data_plan && start_.seed != config_.train.seed)
    spdlog::warn("checkpoint: train.seed {} differs from the checkpoint's {}: the data order changes",
                 config_.train.seed, start_.seed);
  if (start_.lr_total_steps > 0 && start_.lr_total_steps != total_steps_)
    spdlog::warn("checkpoint: the LR schedule now spans {} steps, the checkpoint's spanned {}", total_steps_,
                 start_.lr_total_steps);
}

// The saved position must be one this run's data plan can reach: within the configured epochs and, when the batch
// plan, seed and schedule are unchanged (so positions mean the same steps), within its epoch and equal to the
// steps before it. An edited or damaged metadata.json would otherwise resume nowhere and "finish" at once.
void Trainer::check_resume_position(const std::string& dir, const CheckpointMetadata& saved) const {
  const std::string file = (fs::path(dir) / kCheckpointMetadataFile).string();
  const TrainingPosition& p = saved.position;
  const int64_t epochs = plans_->num_epochs();
  VEOMNI_INPUT_CHECK(p.epoch < epochs || (p.epoch == epochs && p.step_in_epoch == 0),
                     "{}: key 'position.epoch' is {} (step_in_epoch {}) but train.num_train_epochs is {}: the position "
                     "lies beyond the run (hint: raise train.num_train_epochs, or check the checkpoint)",
                     file, p.epoch, p.step_in_epoch, epochs);
  VEOMNI_INPUT_CHECK(p.optimizer_steps <= p.global_step,
                     "{}: key 'position.optimizer_steps' is {}, more than position.global_step {}", file,
                     p.optimizer_steps, p.global_step);
  const bool same_plan = saved.data_plan && *saved.data_plan == data_plan_info() && p.seed == config_.train.seed &&
                         p.lr_total_steps == total_steps_;
  if (!same_plan || p.epoch == epochs) return;
  const int64_t steps = plans_->steps_in_epoch(p.epoch);
  VEOMNI_INPUT_CHECK(p.step_in_epoch <= steps,
                     "{}: key 'position.step_in_epoch' is {} but epoch {} of the (unchanged) data plan has {} steps",
                     file, p.step_in_epoch, p.epoch, steps);
  const int64_t expected = plans_->steps_before(p.epoch) + p.step_in_epoch;
  VEOMNI_INPUT_CHECK(p.global_step == expected,
                     "{}: key 'position.global_step' is {} but epoch {} step {} is step {} of the (unchanged) data "
                     "plan: global_step, epoch and step_in_epoch disagree (an edited or damaged file?)",
                     file, p.global_step, p.epoch, p.step_in_epoch, expected);
}

// A checkpoint taken at the end of an epoch points past its last step: continue with the next epoch.
void Trainer::normalise_start_position() {
  while (start_.epoch < plans_->num_epochs() && start_.step_in_epoch >= plans_->steps_in_epoch(start_.epoch)) {
    ++start_.epoch;
    start_.step_in_epoch = 0;
  }
}

// A signal may reach only some ranks (mpirun, a scheduler): every rank stops after the same step. The signal number
// is 0 on ranks that got none; the max over ranks names the one received.
int Trainer::agree_on_stop_signal() {
  if (!config_.train.checkpoint.save_on_signal) return 0;
  std::vector<double> received{static_cast<double>(stop_signal_received())};
  world_->allreduce_max(received);
  return static_cast<int>(received[0]);
}

std::string Trainer::save_checkpoint_at(int64_t global_step, int64_t epoch, int64_t next_step_in_epoch,
                                        double last_lr) {
  const auto begin = std::chrono::steady_clock::now();
  CheckpointSaveRequest request;
  request.output_dir = config_.train.checkpoint.output_dir;
  request.save_total_limit = config_.train.checkpoint.save_total_limit;
  request.mesh = mesh_.shape;
  // Under LoRA the language model's group may hold no adapter (exclude_modules): the groups that step agree.
  int64_t optimizer_steps = 0;
  for (const OptimizerGroup& g : optimizers_) optimizer_steps = std::max(optimizer_steps, g.adamw->steps_taken());
  request.position = {global_step, optimizer_steps, epoch, next_step_in_epoch, config_.train.seed, total_steps_, last_lr};
  request.data_plan = data_plan_info();
  request.model_config = model_config_;
  request.head = model_->head();
  request.hf_config_json = hf_config_json_;
  request.train_config_yaml = train_config_to_yaml(config_);
  request.tokenizer_path = config_.model.tokenizer_path;
  request.producer = version_text("veomni-train");
  request.adapter = adapter_;
  request.optimizer_type = config_.train.optimizer.type;
  request.metrics = &metrics_;
  if (fault_) {
    request.fault_point = [this, global_step](const std::string& point) {
      if (fault_->hits(world_->rank(), global_step, point == "rank_file" ? "save" : point.c_str()))
        kill_self(world_->rank(), global_step, "during the checkpoint save (" + point + ")");
    };
  }
  const std::string dir = save_checkpoint(*world_, request, shard_states());
  spdlog::info("checkpoint: saved step {} to {} in {:.2f}s", global_step, dir,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
  return dir;
}

// train.checkpoint.save_hf_weights: every hf_save_steps steps (0: none) and at the end of the run (VeOmni's).
bool Trainer::hf_weights_due(int64_t step, bool last) const {
  const CheckpointArgs& ck = config_.train.checkpoint;
  return ck.save_hf_weights && ((ck.hf_save_steps > 0 && step % ck.hf_save_steps == 0) || last);
}

// Peak GPU memory of this step (the caching allocator's high-water marks), max over ranks.
void Trainer::measure_gpu_memory(StepMetrics& m) {
  if (!device_.is_cuda()) return;
  const backend::GpuMemory mem = backend::gpu_memory();
  std::vector<double> peaks{static_cast<double>(mem.peak_allocated), static_cast<double>(mem.peak_reserved)};
  world_->allreduce_max(peaks);
  m.peak_allocated_gib = peaks[0] / kGiB;
  m.peak_reserved_gib = peaks[1] / kGiB;
  peak_gpu_bytes_ = std::max(peak_gpu_bytes_, peaks[0]);
  backend::reset_gpu_peak_memory();
}

StepMetrics Trainer::run_step(const StepPlan& step, int64_t global_step, const StepPlan* next,
                                 BatchPrefetch& prefetch) {
  maybe_inject_fault(global_step);
  auto mark = std::chrono::steady_clock::now();
  std::vector<MultimodalBatch> batches = prefetch.take(global_step, step);
  if (next) prefetch.start(global_step + 1, *next);
  const double data_seconds = seconds_since(mark);
  // Every rank counts its share of the objective's normaliser; the sum over the world is the global batch's (SP
  // slices partition a row).
  std::vector<int64_t> counts{0, 0, 0};
  for (const MultimodalBatch& b : batches) {
    counts[0] += objective_->normaliser(b, mesh_.sp_rank() == 0);
    if (mesh_.sp_rank() == 0) counts[2] += sum_squared_seqlens(b.text.cu_seqlens);
  }
  for (size_t i = static_cast<size_t>(mesh_.dp_rank()); i < step.micro_batches.size();
       i += static_cast<size_t>(mesh_.shape.dp()))
    if (mesh_.sp_rank() == 0) counts[1] += step.micro_batches[i].tokens;
  world_->allreduce_sum(counts);

  const StepLossScale scale =
      objective_->step_scale(counts[0], static_cast<int64_t>(step.micro_batches.size()));

  fsdp_->zero_grads();
  std::vector<double> sums(objective_->num_sums(), 0.0);
  for (const MultimodalBatch& batch : batches)
    objective_->micro_batch(*model_, batch, scale, mesh_.sp_rank() == 0, sums);
  fsdp_->wait_for_gradients();  // the last reduce-scatters land in the shard gradients before clipping reads them
  if (reference_fsdp_) reference_fsdp_->wait_for_gradients();  // drops the reference's prefetched gathers
  world_->allreduce_sum(sums);

  StepMetrics m;
  m.objective = objective_->step_metrics(sums, scale);
  m.loss = m.objective.front().second;
  m.valid_tokens = counts[0];
  m.tokens = counts[1];
  m.sum_squared_seqlens = static_cast<double>(counts[2]);
  if (!std::isfinite(m.loss) && config_.train.abort_on_nan)
    throw Error(fmt::format("loss is {} at step {} (train.abort_on_nan is on; lower train.optimizer.lr or check the "
                            "data)", std::isnan(m.loss) ? "NaN" : (m.loss > 0 ? "+inf" : "-inf"), global_step));
  const GradientClip clip = clip_gradients();
  m.grad_norm = clip.norm;
  m.data_seconds = data_seconds;
  m.compute_seconds = seconds_since(mark);
  m.lr = schedule_->lr_at(global_step - 1);
  step_optimizers(m.lr, clip.grad_scale);  // offloaded, it also refreshes the compute copies of the masters
  backend::synchronize();  // the step's time includes its queued GPU work
  m.optimizer_seconds = seconds_since(mark);
  measure_gpu_memory(m);
  return m;
}

// MFU is measured against the GPU's dense bf16 peak: reported for bf16 compute on a GPU of the table only (a
// float32 run or the CPU has no comparable peak).
double Trainer::mfu_peak_flops() const {
  if (!device_.is_cuda() || config_.compute_dtype() != DType::BF16) return 0.0;
  const std::string gpu = backend::gpu_name();
  const double peak = peak_bf16_flops_per_second(gpu);
  if (peak > 0)
    spdlog::info("MFU: against {:g} TFLOP/s per GPU ({} bf16)", peak / 1e12, gpu);
  else
    spdlog::info("MFU: not reported ({} is not in the peak-throughput table)", gpu);
  return peak;
}

// The step's model FLOPs per GPU-second against the GPU's bf16 peak (0 when the peak is unknown).
double Trainer::step_mfu(const StepMetrics& m, double seconds) const {
  if (peak_flops_per_gpu_ <= 0 || seconds <= 0) return 0.0;
  const StepWork work{static_cast<double>(m.tokens), m.sum_squared_seqlens, reference_ != nullptr};
  return train_step_flops(model_config_, model_->head(), work) / seconds / world_->size() / peak_flops_per_gpu_;
}

void Trainer::log_step(int64_t step, const StepMetrics& m, double seconds, ProgressClock& clock) {
  std::vector<std::pair<std::string, double>> values = m.objective;
  values.insert(values.end(), {{"grad_norm", m.grad_norm}, {"lr", m.lr}, {"tokens", static_cast<double>(m.tokens)},
                               {"tokens_per_sec", seconds > 0 ? static_cast<double>(m.tokens) / seconds : 0.0},
                               {"step_time", seconds}, {"data_time", m.data_seconds},
                               {"compute_time", m.compute_seconds}, {"optimizer_time", m.optimizer_seconds}});
  const double tokens_per_gpu_per_sec = seconds > 0 ? static_cast<double>(m.tokens) / seconds / world_->size() : 0.0;
  values.push_back({"tokens_per_sec_per_gpu", tokens_per_gpu_per_sec});
  const double mfu = step_mfu(m, seconds);
  if (device_.is_cuda())
    values.insert(values.end(), {{"mfu", mfu},
                                 {"max_memory_allocated_gib", m.peak_allocated_gib},
                                 {"max_memory_reserved_gib", m.peak_reserved_gib}});
  hold_absent_source_losses(values, metrics_);
  metrics_.append(values);
  if (tensorboard_) tensorboard_->add_scalars(step, values);
  if (step % std::max<int64_t>(1, config_.train.log_steps) == 0 || step == total_steps_) {
    const std::string memory =
        device_.is_cuda() ? fmt::format(" | peak mem {:.2f} GiB", m.peak_allocated_gib) : std::string();
    const std::string mfu_text = peak_flops_per_gpu_ > 0 ? fmt::format(" | MFU {:.1f}%", 100.0 * mfu) : std::string();
    std::string per_source;  // " (math 1.234, code 2.345)" for a mixed SFT run
    for (const auto& [key, value] : values)
      if (key.starts_with("loss_")) per_source += fmt::format("{}{} {:.4f}", per_source.empty() ? " (" : ", ",
                                                             key.substr(5), value);
    if (!per_source.empty()) per_source += ")";
    spdlog::info("step {}/{} | loss {:.5f}{} | grad_norm {:.4f} | lr {:.3e} | {} tok/s ({}/{}){}{} | ETA {}", step,
                 total_steps_, m.loss, per_source, m.grad_norm, m.lr,
                 format_count(static_cast<double>(m.tokens) / std::max(seconds, 1e-9)),
                 format_count(tokens_per_gpu_per_sec), device_.is_cuda() ? "GPU" : "rank", mfu_text, memory,
                 format_duration(clock.eta_seconds()));
  }
}

// Each step appends one line to the log's journal; the whole log is rewritten (atomically, fsynced) after this
// process's first step, every kMetricsRewriteSteps steps and where asked (a checkpoint, the last step).
void Trainer::write_step_metrics(const MetricsLogFile& file, int64_t step, bool rewrite) const {
  constexpr int64_t kMetricsRewriteSteps = 100;
  if (rewrite || step == start_.global_step + 1 || step % kMetricsRewriteSteps == 0)
    file.write(metrics_);
  else
    file.append_last_step(metrics_);
}

bool Trainer::evaluation_due(int64_t step, bool last) const {
  const int64_t every = config_.train.eval_steps;
  return evaluator_ && ((every > 0 && step % every == 0) || last);
}

// A mixed run's objective also sums each source's loss; the eval set is one dataset, whose samples belong to no
// source, so those metrics (a 0/0 loss) are not part of its evaluation.
void Trainer::drop_source_metrics(EvalMetrics& eval) const {
  if (!sources_->mixed()) return;
  for (size_t s = 0; s < sources_->size(); ++s) {
    const std::string& name = sources_->spec(s).name;
    std::erase_if(eval, [&](const auto& metric) {
      return metric.first == "eval_loss_" + name || metric.first == "eval_tokens_" + name;
    });
  }
}

// The one place an evaluation's metrics are produced: logged (log_dict.json's eval series, TensorBoard, the progress
// line) and returned.
EvalMetrics Trainer::run_evaluation(int64_t step, const std::string& metrics_path) {
  const auto begin = std::chrono::steady_clock::now();
  EvalMetrics eval = evaluator_->evaluate(
      *objective_, *model_, *world_, mesh_,
      [this](const DatasetReader& dataset, const std::string& path, const std::vector<int64_t>& samples) {
        std::vector<Sample> read;
        std::vector<std::string> contexts;
        for (int64_t index : samples) {
          read.push_back(dataset.read(index));
          contexts.push_back(fmt::format("{} sample {}", path, index));
        }
        return collate_samples(read, contexts);
      });
  drop_source_metrics(eval);
  fsdp_->wait_for_gradients();  // drops the gathers prefetched for a backward that does not come
  if (reference_fsdp_) reference_fsdp_->wait_for_gradients();
  metrics_.append_eval(step, eval);
  if (world_->rank() == 0) MetricsLogFile(metrics_path).write(metrics_);
  if (tensorboard_) tensorboard_->add_scalars(step, eval);
  std::string values;
  for (const auto& [name, value] : eval) values += fmt::format(" | {} {:.5f}", name, value);
  spdlog::info("eval step {}/{}{} | {:.2f}s", step, total_steps_, values,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
  return eval;
}

void Trainer::write_summary(const TrainSummary& summary, const std::string& path) const {
  nlohmann::ordered_json j;
  j["steps"] = summary.steps;
  j["global_step"] = summary.global_step;
  j["resumed_from"] = summary.resumed_from;
  j["last_checkpoint"] = summary.last_checkpoint;
  j["stopped_by_signal"] = summary.stopped_by.empty() ? nlohmann::ordered_json(nullptr)
                                                      : nlohmann::ordered_json(summary.stopped_by);
  j["tokens"] = summary.tokens;
  j["elapsed_seconds"] = summary.elapsed_seconds;
  j["tokens_per_sec"] = static_cast<double>(summary.tokens) / std::max(summary.elapsed_seconds, 1e-9);
  j["final_loss"] = summary.final_loss;
  nlohmann::ordered_json eval = nullptr;
  if (summary.final_eval_step > 0) {
    eval = nlohmann::ordered_json::object();
    eval["step"] = summary.final_eval_step;
    for (const auto& [name, value] : summary.final_eval) eval[name] = value;
  }
  j["final_eval"] = eval;
  j["mesh"] = {{"world", mesh_.shape.world}, {"dp", mesh_.shape.dp()}, {"ulysses", mesh_.shape.ulysses},
               {"ep", mesh_.shape.ep}};
  j["device"] = device_.str();
  j["compute_dtype"] = dtype_name(device_.is_cpu() ? DType::F32 : config_.compute_dtype());
  j["parameters"] = model_->params().num_elements();
  j["peak_gpu_memory_allocated_bytes"] = peak_gpu_bytes_;
  j["state_bytes_per_rank_max"] = summary.state_bytes_max;
  j["producer"] = version_text("veomni-train");
  write_json_file(path, j);
}

TrainSummary Trainer::run() {
  // Before anything is read from or written to output_dir: its checks and the one-run-per-directory lock. The other
  // ranks learn of a failure through the abort.
  if (world_->rank() == 0) output_lock_ = std::make_unique<OutputDirLock>(config_.train.checkpoint.output_dir);
  apply_kernel_settings(kernel_settings_of(config_));
  if (world_->rank() == 0 && config_.train.use_tensorboard) {
    const std::string dir = (fs::path(config_.train.checkpoint.output_dir) / "tensorboard").string();
    tensorboard_ = std::make_unique<TensorBoardWriter>(dir);
    spdlog::info("tensorboard: {} (view with: tensorboard --logdir {})", tensorboard_->path(), dir);
  }
  resume_dir_ = agree_on_resume_checkpoint();
  build_mesh_and_model();
  build_data();
  build_objective();
  build_evaluator();
  build_optimizer();
  if (resume_dir_) resume_from(*resume_dir_);
  peak_flops_per_gpu_ = mfu_peak_flops();
  const fs::path output_dir = config_.train.checkpoint.output_dir;
  TrainSummary summary;
  summary.metrics_path = (output_dir / "log_dict.json").string();
  summary.resumed_from = resume_dir_.value_or("");
  if (world_->rank() == 0) {
    save_train_config(config_, (output_dir / "veomni_cli.yaml").string());
    if (const int removed = remove_temporaries(checkpoints_dir(output_dir.string())))
      spdlog::info("checkpoint: removed {} unfinished save(s) of an interrupted run", removed);
    // A resumed log restarts at the checkpoint's step, dropping steps the interrupted run logged after it.
    MetricsLogFile(summary.metrics_path).restart(metrics_, resume_dir_.has_value());
  }
  const MetricsLogFile metrics_file(summary.metrics_path);

  ProgressClock clock(start_.global_step, total_steps_);
  int64_t global_step = start_.global_step;
  // The op profile leaves out the first steps (warm-up: first-use kernel loading, cuBLASLt timing, allocator growth),
  // so its table describes steady steps.
  const int64_t profile_skip = config_.train.op_profile.skip_steps;
  const int64_t save_steps = config_.train.checkpoint.save_steps;
  if (config_.train.checkpoint.save_on_signal) install_stop_signal_handlers();
  int stop_signal = 0;
  // Within an epoch the next step's batches are read while a step computes (plans_ keeps one epoch's plan at a time).
  BatchPrefetch prefetch([this](const StepPlan& plan) { return collate_my_micro_batches(plan); });
  for (int64_t e = start_.epoch; e < plans_->num_epochs() && stop_signal == 0; ++e) {
    const std::vector<StepPlan>& epoch = plans_->epoch(e);
    const size_t first = e == start_.epoch ? static_cast<size_t>(start_.step_in_epoch) : 0;
    for (size_t s = first; s < epoch.size(); ++s) {
      ++global_step;
      const StepPlan* next = s + 1 < epoch.size() ? &epoch[s + 1] : nullptr;
      const StepMetrics m = run_step(epoch[s], global_step, next, prefetch);
      if (op_profile_enabled() && global_step - start_.global_step == profile_skip) op_profile_reset();
      const double seconds = clock.finish_step(global_step);
      log_step(global_step, m, seconds, clock);
      summary.tokens += m.tokens;
      summary.final_loss = m.loss;
      const bool last = e + 1 == plans_->num_epochs() && s + 1 == epoch.size();
      const bool hf_weights = hf_weights_due(global_step, last);
      const bool save =
          (save_steps > 0 && global_step % save_steps == 0) || (last && save_steps >= 0) || hf_weights;
      if (world_->rank() == 0) write_step_metrics(metrics_file, global_step, last || save);
      if (evaluation_due(global_step, last)) {
        summary.final_eval = run_evaluation(global_step, summary.metrics_path);
        summary.final_eval_step = global_step;
      }
      if (save) summary.last_checkpoint = save_checkpoint_at(global_step, e, static_cast<int64_t>(s) + 1, m.lr);
      if (hf_weights) save_checkpoint_hf_weights(*world_, summary.last_checkpoint);
      if (!last && (stop_signal = agree_on_stop_signal()) != 0) {
        if (world_->rank() == 0) metrics_file.write(metrics_);
        if (!save) summary.last_checkpoint = save_checkpoint_at(global_step, e, static_cast<int64_t>(s) + 1, m.lr);
        summary.stopped_by = stop_signal_name(stop_signal);
        spdlog::warn("stopped by {} after step {}: checkpoint {} (resume with train.checkpoint.load_path auto)",
                     summary.stopped_by, global_step, summary.last_checkpoint);
        break;
      }
    }
  }
  summary.steps = global_step - start_.global_step;
  summary.global_step = global_step;
  summary.elapsed_seconds = clock.elapsed_seconds();
  summary.state_bytes_max = state_bytes_max_;
  if (world_->rank() == 0) write_summary(summary, (output_dir / "run_summary.json").string());
  spdlog::info("done: {} steps, {} tokens in {} ({} tok/s), final loss {:.5f}; metrics in {}", summary.steps,
               format_count(static_cast<double>(summary.tokens)), format_duration(summary.elapsed_seconds),
               format_count(static_cast<double>(summary.tokens) / std::max(summary.elapsed_seconds, 1e-9)),
               summary.final_loss, summary.metrics_path);
  return summary;
}

}  // namespace

TrainSummary run_training(const TrainConfig& config, std::shared_ptr<Communicator> world) {
  Trainer trainer(config, std::move(world));
  return trainer.run();
}

}  // namespace veomni
