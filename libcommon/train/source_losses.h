// Per-source loss of a mixed run (data.datasets; VeOmni's channel loss): each source's cross-entropy summed over its
// targets in a micro-batch, and its token-mean per step as loss_<name>, with tokens_<name> its target count.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "model/thinker/multimodal_batch.h"
#include "train/metrics_log.h"

namespace veomni {

// Adds this rank's share of each source's (cross-entropy sum, target count) to sums[2s] and sums[2s + 1]:
// token_losses f32 [S] are the slice's per-target losses (0 where ignored), assigned to sources through
// batch.source_spans over the full packed row (the slice starts at batch.text.sp_offset).
void add_source_losses(const MultimodalBatch& batch, const Tensor& token_losses, double* sums, size_t num_sources);

// loss_<name> (sum / count; NaN when the step has no target of that source) and tokens_<name> for every source.
std::vector<std::pair<std::string, double>> source_loss_metrics(const std::vector<std::string>& names,
                                                                const double* sums);

// A source absent from a step (tokens_<name> 0) keeps the loss_<name> of its last step in the series (0 before its
// first), so that log_dict.json's series stay equal-length numbers; tokens_<name> tells the steps apart.
void hold_absent_source_losses(std::vector<std::pair<std::string, double>>& values, const MetricsLog& log);

}  // namespace veomni
