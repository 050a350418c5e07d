// The run's steps epoch by epoch: each epoch's batch plan is made when the run reaches it (not all up front), and
// the step counts the LR schedule, the progress line and resume checks need are computed without keeping plans.
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "data/batch_plan.h"
#include "data/mix_plan.h"

namespace veomni {

class EpochPlans {
 public:
  // max_steps > 0 caps each epoch's steps (train.max_steps); -1: whole epochs.
  // mix: the sources of a mixed run (data.datasets), whose concatenated samples sample_lengths lists; empty: one
  // dataset, shuffled as a whole every epoch.
  EpochPlans(std::vector<int64_t> sample_lengths, const BatchPlanOptions& options, int64_t num_epochs,
             int64_t max_steps, std::vector<MixSource> mix = {});

  int64_t num_epochs() const { return num_epochs_; }
  // Steps of the whole run (all epochs).
  int64_t total_steps() const { return total_steps_; }
  // Steps of epoch e (capped by max_steps).
  int64_t steps_in_epoch(int64_t epoch) const;
  // Steps of the epochs before `epoch`.
  int64_t steps_before(int64_t epoch) const;
  // The (capped) plan of epoch e, made on first request; only the last requested epoch is kept.
  const std::vector<StepPlan>& epoch(int64_t epoch);
  const std::vector<int64_t>& sample_lengths() const { return lengths_; }

 private:
  std::vector<StepPlan> plan(int64_t epoch) const;
  // The step count every epoch has when it is known without planning each one (-1 otherwise): max_steps when
  // every epoch certainly reaches it, epoch 0's count when the order does not change between epochs.
  int64_t uniform_epoch_steps() const;

  std::vector<int64_t> lengths_;
  BatchPlanOptions options_;
  std::vector<MixSource> mix_;
  int64_t num_epochs_;
  int64_t max_steps_;
  int64_t uniform_steps_ = -1;
  int64_t total_steps_ = 0;
  int64_t planned_epoch_ = -1;
  std::vector<StepPlan> planned_;
  mutable std::map<int64_t, int64_t> counted_;  // step counts of epochs planned only to be counted
};

}  // namespace veomni
