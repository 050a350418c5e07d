// Greedy token-budget packing of shuffled samples into micro-batches and steps.
#include "data/batch_plan.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/rng.h"

namespace veomni {

std::vector<int64_t> epoch_order(int64_t num_samples, int64_t epoch, const BatchPlanOptions& options) {
  std::vector<int64_t> order(static_cast<size_t>(num_samples));
  std::iota(order.begin(), order.end(), 0);
  if (!options.shuffle) return order;
  Rng rng(options.seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(epoch) + 1);
  for (int64_t i = num_samples - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(i + 1)));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

std::vector<StepPlan> plan_epoch(const std::vector<int64_t>& sample_lengths, int64_t epoch,
                                 const BatchPlanOptions& options) {
  return plan_order(sample_lengths, epoch_order(static_cast<int64_t>(sample_lengths.size()), epoch, options), options);
}

std::vector<StepPlan> plan_order(const std::vector<int64_t>& sample_lengths, const std::vector<int64_t>& order,
                                 const BatchPlanOptions& options) {
  VEOMNI_INPUT_CHECK(options.max_seq_len > 0, "data.max_seq_len must be positive (got {})", options.max_seq_len);
  VEOMNI_INPUT_CHECK(options.token_budget >= options.max_seq_len,
                     "micro-batch token budget {} is smaller than max_seq_len {}", options.token_budget,
                     options.max_seq_len);
  VEOMNI_INPUT_CHECK(options.micro_batches_per_step > 0, "micro-batches per step must be positive");
  std::vector<MicroBatchPlan> micro_batches;
  MicroBatchPlan current;
  for (int64_t index : order) {
    const int64_t length = std::min(sample_lengths[static_cast<size_t>(index)], options.max_seq_len);
    if (length <= 0) continue;  // empty samples carry no token
    if (current.tokens + length > options.token_budget && !current.samples.empty()) {
      micro_batches.push_back(std::move(current));
      current = MicroBatchPlan{};
    }
    current.samples.push_back(index);
    current.tokens += length;
  }
  if (!current.samples.empty()) micro_batches.push_back(std::move(current));

  std::vector<StepPlan> steps;
  const auto per_step = static_cast<size_t>(options.micro_batches_per_step);
  for (size_t begin = 0; begin + per_step <= micro_batches.size(); begin += per_step) {
    StepPlan step;
    step.micro_batches.assign(std::make_move_iterator(micro_batches.begin() + static_cast<std::ptrdiff_t>(begin)),
                              std::make_move_iterator(micro_batches.begin() + static_cast<std::ptrdiff_t>(begin + per_step)));
    steps.push_back(std::move(step));
  }
  return steps;
}

}  // namespace veomni
