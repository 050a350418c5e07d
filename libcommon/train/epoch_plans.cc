// Lazy per-epoch batch plans; step counts from a packing bound when max_steps caps every epoch.
#include "train/epoch_plans.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace veomni {

EpochPlans::EpochPlans(std::vector<int64_t> sample_lengths, const BatchPlanOptions& options, int64_t num_epochs,
                       int64_t max_steps, std::vector<MixSource> mix)
    : lengths_(std::move(sample_lengths)),
      options_(options),
      mix_(std::move(mix)),
      num_epochs_(num_epochs),
      max_steps_(max_steps) {
  uniform_steps_ = uniform_epoch_steps();
  if (uniform_steps_ >= 0) {
    VEOMNI_INPUT_CHECK(uniform_steps_ == 0 || num_epochs_ <= std::numeric_limits<int64_t>::max() / uniform_steps_,
                       "train.num_train_epochs {} x {} steps per epoch do not fit a 64-bit step counter",
                       num_epochs_, uniform_steps_);
    total_steps_ = num_epochs_ * uniform_steps_;
  } else {
    total_steps_ = steps_before(num_epochs_);
  }
}

// Greedy packing opens a new micro-batch only when the current one is full, so an epoch has at least
// ceil(tokens / budget) micro-batches whatever the order: when that many make max_steps steps, every epoch is capped.
// A mixed epoch draws other samples every epoch (its tokens vary): each epoch is counted by planning it.
int64_t EpochPlans::uniform_epoch_steps() const {
  if (!mix_.empty()) return -1;
  if (!options_.shuffle) return static_cast<int64_t>(plan(0).size());
  if (max_steps_ <= 0) return -1;
  int64_t tokens = 0;
  for (int64_t length : lengths_) tokens += std::clamp<int64_t>(length, 0, options_.max_seq_len);
  const int64_t min_micro_batches = (tokens + options_.token_budget - 1) / options_.token_budget;
  return min_micro_batches / options_.micro_batches_per_step >= max_steps_ ? max_steps_ : -1;
}

std::vector<StepPlan> EpochPlans::plan(int64_t epoch) const {
  std::vector<StepPlan> steps = mix_.empty() ? plan_epoch(lengths_, epoch, options_)
                                             : plan_order(lengths_, mixed_epoch_order(mix_, epoch, options_), options_);
  if (max_steps_ > 0 && static_cast<int64_t>(steps.size()) > max_steps_) steps.resize(static_cast<size_t>(max_steps_));
  return steps;
}

int64_t EpochPlans::steps_in_epoch(int64_t epoch) const {
  if (uniform_steps_ >= 0) return uniform_steps_;
  if (epoch == planned_epoch_) return static_cast<int64_t>(planned_.size());
  if (const auto known = counted_.find(epoch); known != counted_.end()) return known->second;
  return counted_[epoch] = static_cast<int64_t>(plan(epoch).size());
}

int64_t EpochPlans::steps_before(int64_t epoch) const {
  if (uniform_steps_ >= 0) return epoch * uniform_steps_;
  int64_t steps = 0;
  for (int64_t e = 0; e < epoch; ++e) steps += steps_in_epoch(e);
  return steps;
}

const std::vector<StepPlan>& EpochPlans::epoch(int64_t epoch) {
  if (epoch != planned_epoch_) {
    planned_ = plan(epoch);
    planned_epoch_ = epoch;
  }
  return planned_;
}

}  // namespace veomni
