// Which samples veomni-score packs into each micro-batch and which data-parallel rank scores it: every sample once,
// in input order, whatever the layout.
#pragma once
#include <cstdint>
#include <vector>

#include "data/batch_plan.h"

namespace veomni {

// The micro-batches of a scoring pass, grouped in rounds of one micro-batch per data-parallel rank: round r gives
// micro-batch r * dp + d to rank d. Rounds follow the input order, so the results of a round extend the output.
struct ScorePlan {
  std::vector<MicroBatchPlan> micro_batches;  // in input order; consecutive samples (empty ones are skipped)
  int64_t dp_size = 1;
  int64_t max_seq_len = 0;  // the longest sample: nothing is truncated

  int64_t num_rounds() const;
  // The micro-batch rank `dp_rank` scores in round `round`; -1 when the plan has run out (the rank still runs a
  // forward so that it meets the collectives of the others, and discards it).
  int64_t micro_batch_of(int64_t round, int64_t dp_rank) const;
};

// The trainer's greedy packing (data/batch_plan.h) without shuffling and without truncation: a sample joins the
// current micro-batch while the tokens fit in token_budget, which is raised to the longest sample when below it.
ScorePlan plan_scoring(const std::vector<int64_t>& sample_lengths, int64_t token_budget, int64_t dp_size);

}  // namespace veomni
