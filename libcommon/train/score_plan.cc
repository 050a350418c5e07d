// Input-order packing of the samples to score and their rounds over the data-parallel ranks.
#include "train/score_plan.h"

#include <algorithm>

#include "core/error.h"

namespace veomni {

int64_t ScorePlan::num_rounds() const {
  const auto count = static_cast<int64_t>(micro_batches.size());
  return (count + dp_size - 1) / dp_size;
}

int64_t ScorePlan::micro_batch_of(int64_t round, int64_t dp_rank) const {
  const int64_t index = round * dp_size + dp_rank;
  return index < static_cast<int64_t>(micro_batches.size()) ? index : -1;
}

ScorePlan plan_scoring(const std::vector<int64_t>& sample_lengths, int64_t token_budget, int64_t dp_size) {
  VEOMNI_INPUT_CHECK(token_budget > 0, "--micro-batch-tokens must be positive (got {})", token_budget);
  VEOMNI_CHECK(dp_size > 0, "data-parallel size {}", dp_size);
  ScorePlan plan;
  plan.dp_size = dp_size;
  for (int64_t length : sample_lengths) plan.max_seq_len = std::max(plan.max_seq_len, length);
  BatchPlanOptions options;
  options.max_seq_len = std::max<int64_t>(plan.max_seq_len, 1);
  options.token_budget = std::max(token_budget, options.max_seq_len);
  options.micro_batches_per_step = 1;
  options.shuffle = false;
  for (StepPlan& step : plan_epoch(sample_lengths, 0, options))
    plan.micro_batches.push_back(std::move(step.micro_batches.front()));
  return plan;
}

}  // namespace veomni
