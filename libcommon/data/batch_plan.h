// Which samples form each micro-batch and each optimizer step: a pure function of the lengths, the seed and the
// epoch, identical on every rank, so the global batch never depends on the parallel layout.
#pragma once
#include <cstdint>
#include <vector>

namespace veomni {

struct MicroBatchPlan {
  std::vector<int64_t> samples;  // dataset indices, in packing order
  int64_t tokens = 0;            // sum of their (truncated) lengths
};

struct StepPlan {
  std::vector<MicroBatchPlan> micro_batches;  // micro_batches_per_step of them
};

struct BatchPlanOptions {
  int64_t token_budget = 2048;           // micro_batch_size * max_seq_len (VeOmni's dynamic batching)
  int64_t max_seq_len = 2048;            // longer samples are truncated to this
  int64_t micro_batches_per_step = 1;    // global_batch_size / micro_batch_size
  bool shuffle = true;
  uint64_t seed = 42;
};

// Greedy packing in (shuffled) order: a sample joins the current micro-batch if it fits in the token budget,
// otherwise it opens the next one. Micro-batches are grouped into steps; an incomplete last step is dropped.
std::vector<StepPlan> plan_epoch(const std::vector<int64_t>& sample_lengths, int64_t epoch,
                                 const BatchPlanOptions& options);

// The same packing over a given sample order (indices into sample_lengths; a mixed epoch's, see data/mix_plan.h).
std::vector<StepPlan> plan_order(const std::vector<int64_t>& sample_lengths, const std::vector<int64_t>& order,
                                 const BatchPlanOptions& options);

// The sample order of an epoch (a seeded Fisher–Yates shuffle, or identity).
std::vector<int64_t> epoch_order(int64_t num_samples, int64_t epoch, const BatchPlanOptions& options);

}  // namespace veomni
