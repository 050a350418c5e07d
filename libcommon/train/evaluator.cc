// The eval set's checks and plan, and one forward-only pass over it reduced into eval_* metrics.
#include "train/evaluator.h"

#include <algorithm>

#include "core/error.h"
#include "data/dataset_objective_keys.h"

namespace veomni {

namespace {

std::unique_ptr<DatasetReader> open_eval_set(const std::string& path) {
  try {
    return std::make_unique<DatasetReader>(path);
  } catch (const InputError& e) {
    throw InputError(fmt::format("data.eval_path: {}", e.what()));
  }
}

// The keys that decide what an objective reads: both sets must have the same (the objectives check the training
// set's against train.objective).
void check_same_kind(const DatasetReader& eval, const std::string& eval_path, const DatasetReader& train,
                     const std::string& train_path) {
  std::vector<std::string> keys{kChosenLengthKey, kRefChosenLogpsKey, kRefRejectedLogpsKey};
  keys.insert(keys.end(), kRolloutKeys.begin(), kRolloutKeys.end());
  for (const std::string& key : keys)
    VEOMNI_INPUT_CHECK(eval.has_key(key) == train.has_key(key),
                       "data.eval_path: {} {} key '{}' but data.train_path {} {}: the eval set must be of the "
                       "training set's kind (hint: preprocess both the same way)",
                       eval_path, eval.has_key(key) ? "has" : "has no", key, train_path,
                       train.has_key(key) ? "has it" : "has not");
}

// A pair cannot be truncated: refused before the first evaluation, as the training set's pairs are.
void refuse_long_pairs(const DatasetReader& eval, const std::string& path, int64_t max_seq_len) {
  if (!eval.has_key(kChosenLengthKey)) return;
  for (int64_t i = 0; i < eval.num_samples(); ++i)
    VEOMNI_INPUT_CHECK(eval.sequence_length(i) <= max_seq_len,
                       "data.eval_path: {} sample {} is a preference pair of {} tokens, longer than data.max_seq_len "
                       "{}; a pair cannot be truncated (hint: raise data.max_seq_len, or leave such pairs out with "
                       "veomni-preprocess preference --max-seq-len)",
                       path, i, eval.sequence_length(i), max_seq_len);
}

}  // namespace

Evaluator::Evaluator(const EvalOptions& options, const DatasetReader& train_set, const std::string& train_path)
    : options_(options), dataset_(open_eval_set(options.path)) {
  VEOMNI_INPUT_CHECK(dataset_->num_samples() > 0, "data.eval_path: {} holds no samples", options_.path);
  check_same_kind(*dataset_, options_.path, train_set, train_path);
  refuse_long_pairs(*dataset_, options_.path, options_.max_seq_len);
  std::vector<int64_t> lengths(static_cast<size_t>(dataset_->num_samples()));
  for (int64_t i = 0; i < dataset_->num_samples(); ++i) lengths[static_cast<size_t>(i)] = dataset_->sequence_length(i);
  // Training's packing (the same token budget) in the set's own order: one micro-batch per planned step.
  BatchPlanOptions plan;
  plan.token_budget = options_.token_budget;
  plan.max_seq_len = options_.max_seq_len;
  plan.micro_batches_per_step = 1;
  plan.shuffle = false;
  for (StepPlan& step : plan_epoch(lengths, 0, plan))
    for (MicroBatchPlan& micro_batch : step.micro_batches) micro_batches_.push_back(std::move(micro_batch));
}

std::vector<size_t> Evaluator::my_micro_batches(const DeviceMesh& mesh) const {
  const auto dp = static_cast<size_t>(mesh.shape.dp());
  size_t total = micro_batches_.size();
  if (options_.batches_per_rank > 0) total = std::min(total, static_cast<size_t>(options_.batches_per_rank) * dp);
  std::vector<size_t> mine;
  for (size_t i = static_cast<size_t>(mesh.dp_rank()); i < total; i += dp) mine.push_back(i);
  return mine;
}

EvalMetrics Evaluator::evaluate(Objective& objective, TrainModel& model, Communicator& world, const DeviceMesh& mesh,
                                const CollateMicroBatch& collate) const {
  const std::vector<size_t> mine = my_micro_batches(mesh);
  const bool reports_shared = mesh.sp_rank() == 0;
  auto collate_at = [&](size_t i) { return collate(*dataset_, options_.path, micro_batches_[i].samples); };

  // counts: the objective's normaliser, the micro-batches evaluated (once per SP group), the most any rank runs.
  std::vector<int64_t> counts{0, reports_shared ? static_cast<int64_t>(mine.size()) : 0};
  for (size_t i : mine) counts[0] += objective.normaliser(collate_at(i), reports_shared);
  world.allreduce_sum(counts);
  std::vector<double> rounds{static_cast<double>(mine.size())};
  world.allreduce_max(rounds);
  const StepLossScale scale = objective.step_scale(counts[0], std::max<int64_t>(1, counts[1]));

  std::vector<double> sums(objective.num_sums(), 0.0);
  for (size_t k = 0; k < static_cast<size_t>(rounds[0]); ++k) {
    if (k < mine.size()) {
      objective.evaluate(model, collate_at(mine[k]), scale, reports_shared, sums);
    } else {  // a filler: the collectives of a forward, its values dropped
      std::vector<double> dropped(objective.num_sums(), 0.0);
      objective.evaluate(model, collate_at(static_cast<size_t>(mesh.dp_rank()) % micro_batches_.size()), scale,
                         reports_shared, dropped);
    }
  }
  world.allreduce_sum(sums);

  EvalMetrics metrics;
  for (const auto& [name, value] : objective.step_metrics(sums, scale)) metrics.emplace_back("eval_" + name, value);
  return metrics;
}

}  // namespace veomni
