// The scoring pass: build the model as veomni-train does, plan micro-batches in input order, run forward rounds over
// the data-parallel ranks, assemble each round's records over the world and append them to the output on rank 0.
#include "train/scorer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "veomni/version.h"
#include "data/collator.h"
#include "data/dataset_objective_keys.h"
#include "data/dataset_writer.h"
#include "parallel/fsdp.h"
#include "train/progress.h"
#include "train/run_setup.h"
#include "train/score_pass.h"
#include "train/score_plan.h"
#include "train/score_weights.h"

namespace veomni {

double ScoreSummary::perplexity() const {
  return totals.label_tokens > 0 ? std::exp(-totals.sum_logps / static_cast<double>(totals.label_tokens)) : 0.0;
}

namespace {

constexpr double kProgressSeconds = 10.0;  // a progress line at most this often

class Scorer {
 public:
  Scorer(const ScoreOptions& options, std::shared_ptr<Communicator> world)
      : options_(options), config_(options.config), world_(std::move(world)) {}

  ScoreSummary run();

 private:
  void read_model();
  void open_data();
  void build_model();
  std::vector<ScoreSlot> round_slots(int64_t round, int64_t* buffer_size) const;
  void score_micro_batch(const MicroBatchPlan& micro_batch, std::vector<ScoreSlot> slots, std::vector<double>& buffer);
  void score_multimodal_micro_batch(const MicroBatchPlan& micro_batch, std::vector<ScoreSlot> slots,
                                    std::vector<double>& buffer);
  void write_round(const std::vector<ScoreSlot>& slots, const std::vector<double>& buffer);
  void write_sample(int64_t index, const double* record);

  const ScoreOptions& options_;
  const TrainConfig& config_;
  std::shared_ptr<Communicator> world_;
  std::unique_ptr<DatasetReader> dataset_;
  std::vector<int64_t> lengths_;
  bool pairs_ = false;
  ScorePlan plan_;
  Device device_;
  RunModelConfig run_model_;  // the model config.json (or the checkpoint) describes
  ModelConfig model_config_;  // its text model
  RunParallel parallel_;
  std::unique_ptr<TrainModel> model_;
  std::unique_ptr<Fsdp> fsdp_;
  std::unique_ptr<DatasetWriter> writer_;  // rank 0
  int64_t next_index_ = 0;                 // the next sample rank 0 writes
  ScoreTotals totals_;
};

void Scorer::open_data() {
  dataset_ = std::make_unique<DatasetReader>(options_.data_path);
  pairs_ = dataset_->has_key(kChosenLengthKey);
  lengths_.resize(static_cast<size_t>(dataset_->num_samples()));
  for (int64_t i = 0; i < dataset_->num_samples(); ++i) lengths_[static_cast<size_t>(i)] = dataset_->sequence_length(i);
}

// The model's config: the checkpoint's text model, or config.json's text or multimodal model.
void Scorer::read_model() {
  if (options_.checkpoint.empty()) {
    run_model_ = read_run_model_config(config_.resolved_model_config_path());
  } else {
    try {
      run_model_.text = checkpoint_text_model(options_.checkpoint, score_head(options_.what));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{} (hint: --what {} reads a {} head: --what logprobs for a causal LM, reward "
                                   "for a sequence classifier, value for a token classifier)",
                                   e.what(), score_what_name(options_.what),
                                   model_head_name(score_head(options_.what))));
    }
  }
  model_config_ = run_model_.text;
}

void Scorer::build_model() {
  const AcceleratorArgs& acc = config_.train.accelerator;
  VEOMNI_INPUT_CHECK(world_->size() % acc.ulysses_size == 0 && world_->size() % acc.ep_size == 0,
                     "the world size ({}) must be a multiple of train.accelerator.ulysses_size ({}) and ep_size ({})",
                     world_->size(), acc.ulysses_size, acc.ep_size);
  validate_parallel_layout(config_, model_config_);
  device_ = select_run_device(config_.train.device, *world_, "veomni-score");
  parallel_ = build_run_parallel(world_, acc, model_config_, device_);
  ModelOptions options = run_model_options(config_, device_, parallel_);
  options.recompute = false;  // nothing is saved for a backward
  model_ = make_run_model(run_model_, options, score_head(options_.what), false, RunModelValues::Deferred);
  const std::string head_hint =
      fmt::format(" (hint: --what {} reads a {} head: --what logprobs for a causal LM, reward for a sequence "
                  "classifier, value for a token classifier)",
                  score_what_name(options_.what), model_head_name(model_->head()));
  try {
    if (options_.checkpoint.empty()) load_start_weights(*model_, config_.model.model_path, config_.train.seed);
    fsdp_ = std::make_unique<Fsdp>(model_->params(), parallel_.mesh, options.compute_dtype, DType::F32,
                                   acc.fsdp_config.overlap);
    model_->set_param_hooks(fsdp_.get());
    if (!options_.checkpoint.empty())
      load_checkpoint_masters(options_.checkpoint, model_config_, model_->head(), parallel_.mesh, *fsdp_);
  } catch (const InputError& e) {
    // A head's parameter the weights lack (or hold in excess) most likely means the wrong --what.
    const std::string what = e.what();
    if (what.find("score.") == std::string::npos && what.find("lm_head") == std::string::npos) throw;
    throw InputError(what + head_hint);
  }
  spdlog::info("model: {} with a {} head, {}; mesh {}; device {}, compute {}", run_model_.model_type(),
               model_head_name(model_->head()),
               !options_.checkpoint.empty()       ? "from checkpoint " + options_.checkpoint
               : config_.model.model_path.empty() ? fmt::format("random init (seed {})", config_.train.seed)
                                                  : "from " + config_.model.model_path,
               parallel_.mesh.shape.describe(), device_.str(), dtype_name(options.compute_dtype));
}

// The slots of a round's micro-batches, their records laid out one after the other in micro-batch order.
std::vector<ScoreSlot> Scorer::round_slots(int64_t round, int64_t* buffer_size) const {
  std::vector<ScoreSlot> slots;
  int64_t offset = 0;
  for (int64_t d = 0; d < plan_.dp_size; ++d) {
    const int64_t m = plan_.micro_batch_of(round, d);
    if (m < 0) break;
    int64_t row = 0;
    for (int64_t index : plan_.micro_batches[static_cast<size_t>(m)].samples) {
      const int64_t length = lengths_[static_cast<size_t>(index)];
      slots.push_back({index, length, 0, row, offset});
      row += length;
      offset += score_record_size(options_.what, length);
    }
  }
  *buffer_size = offset;
  return slots;
}

// Forward of this rank's slice of a micro-batch; its entries of the slots' records go into buffer.
void Scorer::score_micro_batch(const MicroBatchPlan& micro_batch, std::vector<ScoreSlot> slots,
                               std::vector<double>& buffer) {
  if (run_model_.thinker) {
    score_multimodal_micro_batch(micro_batch, std::move(slots), buffer);
    return;
  }
  CollateOptions collate;
  collate.max_seq_len = plan_.max_seq_len;
  collate.sp_size = parallel_.mesh.shape.ulysses;
  collate.vocab_size = model_config_.vocab_size;
  std::vector<TokenSample> samples;
  for (int64_t index : micro_batch.samples)
    samples.push_back(token_sample_from(dataset_->read(index), fmt::format("{} sample {}", options_.data_path, index)));
  score_packed_samples(*model_, options_.what, samples, std::move(slots), collate, parallel_.mesh.sp_rank(), buffer);
  fsdp_->wait_for_gradients();  // ends the pass: drops the gathers prefetched for a next one
}

// A multimodal micro-batch: collated as veomni-train collates it (media, M-RoPE positions, this rank's SP slice).
void Scorer::score_multimodal_micro_batch(const MicroBatchPlan& micro_batch, std::vector<ScoreSlot> slots,
                                          std::vector<double>& buffer) {
  std::vector<Sample> samples;
  std::vector<NamedSample> named;
  for (int64_t index : micro_batch.samples) samples.push_back(dataset_->read(index));
  for (size_t k = 0; k < samples.size(); ++k) {
    named.push_back({&samples[k], fmt::format("{} sample {}", options_.data_path, micro_batch.samples[k])});
    if (k < slots.size())
      if (const auto found = samples[k].find(kChosenLengthKey); found != samples[k].end())
        slots[k].chosen_length = found->second.data<int64_t>()[0];
  }
  const MultimodalBatch batch = collate_multimodal(
      named, run_multimodal_collate_options(*run_model_.thinker, plan_.max_seq_len, parallel_.mesh));
  score_batch(*model_, options_.what, batch, slots, parallel_.mesh.sp_rank(), buffer);
  fsdp_->wait_for_gradients();  // ends the pass: drops the gathers prefetched for a next one
}

void Scorer::write_sample(int64_t index, const double* record) {
  const int64_t length = lengths_[static_cast<size_t>(index)];
  Sample input = options_.as_reference ? dataset_->read(index) : Sample{};
  writer_->append(score_output_sample(options_.what, record, length, pairs_, options_.as_reference, std::move(input),
                                      totals_));
}

// Rank 0 appends the round's samples, and before them any empty samples the plan skipped (zero records).
void Scorer::write_round(const std::vector<ScoreSlot>& slots, const std::vector<double>& buffer) {
  const std::vector<double> empty(static_cast<size_t>(score_record_size(options_.what, 0)), 0.0);
  for (const ScoreSlot& slot : slots) {
    while (next_index_ < slot.index) write_sample(next_index_++, empty.data());
    write_sample(next_index_++, buffer.data() + slot.record_offset);
  }
}

ScoreSummary Scorer::run() {
  const auto begin = std::chrono::steady_clock::now();
  VEOMNI_INPUT_CHECK(!options_.as_reference || options_.what == ScoreWhat::Logprobs,
                     "--as-reference writes reference log-probs: it needs --what logprobs, not --what {}",
                     score_what_name(options_.what));
  open_data();
  read_model();
  check_score_dataset(*dataset_, options_.data_path, options_.what, run_model_.thinker.has_value());
  build_model();
  plan_ = plan_scoring(lengths_, options_.micro_batch_tokens, parallel_.mesh.shape.dp());
  spdlog::info("data: {} samples{} from {}; {} micro-batches of up to {} tokens over {} data-parallel rank(s)",
               dataset_->num_samples(), pairs_ ? " (preference pairs)" : "", options_.data_path,
               plan_.micro_batches.size(), std::max(options_.micro_batch_tokens, plan_.max_seq_len), plan_.dp_size);
  if (world_->rank() == 0) {
    DatasetInfo info = dataset_->info();
    info.producer = "veomni-score";
    info.producer_version = kVersion;
    writer_ = std::make_unique<DatasetWriter>(options_.out_path, info);
  }
  const int64_t rounds = plan_.num_rounds();
  ProgressClock clock(0, rounds);
  double last_report = 0;
  for (int64_t round = 0; round < rounds; ++round) {
    int64_t buffer_size = 0;
    std::vector<ScoreSlot> slots = round_slots(round, &buffer_size);
    std::vector<double> buffer(static_cast<size_t>(buffer_size), 0.0);
    const int64_t mine = plan_.micro_batch_of(round, parallel_.mesh.dp_rank());
    if (mine >= 0) {
      // The slots of this rank's micro-batch: the round lays micro-batches out in data-parallel rank order.
      const auto first = static_cast<size_t>(std::count_if(slots.begin(), slots.end(), [&](const ScoreSlot& slot) {
        return slot.index < plan_.micro_batches[static_cast<size_t>(mine)].samples.front();
      }));
      const size_t count = plan_.micro_batches[static_cast<size_t>(mine)].samples.size();
      score_micro_batch(plan_.micro_batches[static_cast<size_t>(mine)],
                        {slots.begin() + static_cast<std::ptrdiff_t>(first),
                         slots.begin() + static_cast<std::ptrdiff_t>(first + count)},
                        buffer);
    } else {
      // Out of micro-batches: a forward of the last one meets the others' collectives; nothing is recorded.
      std::vector<double> dropped;
      score_micro_batch(plan_.micro_batches.back(), {}, dropped);
    }
    world_->allreduce_sum(buffer);
    if (world_->rank() == 0) write_round(slots, buffer);
    clock.finish_step(round + 1);
    if (clock.elapsed_seconds() - last_report >= kProgressSeconds && round + 1 < rounds) {
      last_report = clock.elapsed_seconds();
      spdlog::info("scored {}/{} samples | {} tok/s | ETA {}", next_index_, dataset_->num_samples(),
                   format_count(static_cast<double>(totals_.tokens) / last_report),
                   format_duration(clock.eta_seconds()));
    }
  }
  if (world_->rank() == 0) {
    const std::vector<double> empty(static_cast<size_t>(score_record_size(options_.what, 0)), 0.0);
    while (next_index_ < dataset_->num_samples()) write_sample(next_index_++, empty.data());
    writer_->close();
  }
  ScoreSummary summary;
  summary.totals = totals_;
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return summary;
}

}  // namespace

ScoreSummary run_scoring(const ScoreOptions& options, std::shared_ptr<Communicator> world) {
  Scorer scorer(options, std::move(world));
  return scorer.run();
}

}  // namespace veomni
