// Reads and collates the next optimizer step's micro-batches on one background thread while the current step
// computes, so a step does not wait for its data. The batches are those inline collation gives (collation is a
// function of the step's plan), in the same order.
#pragma once
#include <cstdint>
#include <functional>
#include <future>
#include <vector>

#include "data/batch_plan.h"
#include "model/thinker/multimodal_batch.h"

namespace veomni {

class BatchPrefetch {
 public:
  using Batches = std::vector<MultimodalBatch>;
  // Reads and collates this rank's micro-batches of a step; called on the background thread too, so everything it
  // touches must be safe from another thread (the dataset readers are, and the collators keep no state).
  using Collate = std::function<Batches(const StepPlan&)>;

  explicit BatchPrefetch(Collate collate);
  // Waits for a collation in flight; its batches or its error are dropped (no step asked for them).
  ~BatchPrefetch();
  BatchPrefetch(const BatchPrefetch&) = delete;
  BatchPrefetch& operator=(const BatchPrefetch&) = delete;

  // Starts collating the step numbered `step` in the background (one at a time: one started before and not taken is
  // waited for and dropped).
  void start(int64_t step, StepPlan plan);
  // The batches of step `step`: the background ones when start(step, ...) was the last start, else collated now. An
  // error of the background collation (an InputError naming the sample, ...) is rethrown here, on the caller's
  // thread, as inline collation would have thrown it.
  Batches take(int64_t step, const StepPlan& plan);

 private:
  void drop();

  Collate collate_;
  int64_t pending_step_ = -1;
  std::future<Batches> pending_;
};

}  // namespace veomni
