// Per-sequence sums of per-token values over a packed row that Ulysses SP slices over ranks (DPO's sequence
// log-prob is the sum of its label tokens' log-probs, and a sequence may span SP ranks).
#pragma once
#include <vector>

#include "core/tensor.h"
#include "data/batch.h"
#include "model/parallel_hooks.h"

namespace veomni {

// values f32 [S_local] (any device) over this rank's slice -> one sum per packed sequence of the whole row
// (batch.cu_seqlens, global), summed over the SP group (sequence null or of size 1: this slice is the row). Every
// rank of the group gets the same totals; every rank must call it (a collective).
std::vector<double> sequence_sums(const Batch& batch, const Tensor& values, SequenceHooks* sequence);

// The backward: d(values) f32 [S_local] on `device`, each token taking the gradient of its sequence's sum (the
// caller's values are zero where they do not count, and so are their gradients through the heads).
Tensor sequence_sums_backward(const Batch& batch, const std::vector<double>& d_sums, Device device);

// The value at each packed sequence's last token (a reward model reads its value head there, as HF's
// ...ForSequenceClassification pools the last token), whichever SP rank holds it; a collective like sequence_sums.
std::vector<double> sequence_last_values(const Batch& batch, const Tensor& values, SequenceHooks* sequence);
// The backward: d(values) f32 [S_local] on `device`, d_last[j] at sequence j's last token, zero elsewhere.
Tensor sequence_last_values_backward(const Batch& batch, const std::vector<double>& d_last, Device device);

}  // namespace veomni
