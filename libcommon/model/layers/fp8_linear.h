// The FP8 GEMMs of a linear layer (rowwise-scaled E4M3 with a high-precision weight gradient): y = x W^T and
// dx = dy W through kernels/fp8_ops.h, while dW = dy^T x stays in the compute dtype.
#pragma once

#include "core/tensor.h"

namespace veomni {

// Whether the FP8 path can take y = x W^T for x [M, K] and w [N, K], or dx = dy W for dy [M, N]: CUDA bf16
// operands whose M, N and K are multiples of 16. Others (a short final micro-batch, an odd head size) take the bf16 GEMM.
bool fp8_linear_applies(const Tensor& x, const Tensor& w);

// y [M, N] (+)= x W^T: x quantized per row (token), W per output row; beta 0 overwrites y, 1 accumulates.
void fp8_linear_forward(const Tensor& x, const Tensor& w, Tensor& y, float beta = 0.0f);
// dx [M, K] (+)= dy W: dy quantized per row, W per input column (the transposed E4M3 copy the TN GEMM needs).
void fp8_linear_input_grad(const Tensor& dy, const Tensor& w, Tensor& dx, float beta = 0.0f);

}  // namespace veomni
