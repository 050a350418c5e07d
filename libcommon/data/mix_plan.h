// The sample order of an epoch that mixes several datasets by weight (data.datasets): a pure function of the
// sources' sizes and weights, the seed and the epoch, identical on every rank, so the global batch never depends on
// the parallel layout and a resumed run reads exactly the samples the interrupted one would have.
#pragma once
#include <cstdint>
#include <vector>

#include "data/batch_plan.h"

namespace veomni {

struct MixSource {
  int64_t num_samples = 0;
  double weight = 1.0;  // >= 0; the weights need not sum to 1
};

// Samples of the concatenated index space drawn in an epoch: the samples of the sources with a positive weight
// (so an epoch trains as many samples as one pass over them would, whatever the mix).
int64_t mixed_epoch_draws(const std::vector<MixSource>& sources);

// Source s's samples are indices [first_index(s), first_index(s) + num_samples) of the concatenated space.
std::vector<int64_t> mix_first_indices(const std::vector<MixSource>& sources);

// The epoch's order as concatenated indices: each of mixed_epoch_draws() slots draws its source independently with
// probability weight / sum(weights) (a seeded stream per epoch), then takes that source's next sample. Within a
// source samples follow its own order: a seeded shuffle per (source, epoch, pass), or the file order without
// options.shuffle. A source that runs out within the epoch starts a new pass with a new shuffle (it is oversampled);
// a source drawn less than its size leaves the rest of its pass unseen in that epoch (each epoch starts every source
// afresh).
std::vector<int64_t> mixed_epoch_order(const std::vector<MixSource>& sources, int64_t epoch,
                                       const BatchPlanOptions& options);

}  // namespace veomni
