// CPU per-token label log-probabilities and softmax entropy, forward and backward (kernels/ops.h).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace veomni::ops::cpu {

void token_logprobs(const Tensor& logits, const Tensor& labels, int64_t ignore_index, Tensor& logprobs,
                    Tensor& entropy);
void token_logprobs_backward(const Tensor& logits, const Tensor& labels, int64_t ignore_index, const Tensor& dlogprobs,
                             const Tensor& dentropy, Tensor& dlogits);

}  // namespace veomni::ops::cpu
