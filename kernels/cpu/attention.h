// CPU packed variable-length attention, forward and backward (kernels/ops.h).
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace veomni::ops::cpu {

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int32_t>& cu_seqlens,
                       bool causal, float scale, Tensor& out, Tensor& lse);
void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const std::vector<int32_t>& cu_seqlens, bool causal, float scale, Tensor& dq,
                        Tensor& dk, Tensor& dv);

}  // namespace veomni::ops::cpu
