// CPU fused softmax + cross-entropy + gradient (kernels/ops.h).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace veomni::ops::cpu {

void cross_entropy(const Tensor& logits, const Tensor& labels, int64_t ignore_index, float grad_scale, Tensor& losses,
                   Tensor& dlogits);

}  // namespace veomni::ops::cpu
