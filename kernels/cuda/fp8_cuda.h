// The CUDA backend of the FP8 ops of kernels/fp8_ops.h (kernels/cuda/fp8_quantize.cu, kernels/cuda/fp8_gemm.cu),
// with the CPU backend's signatures; kernels/fp8_dispatch.cc checks shapes, dtypes and devices before calling them.
#pragma once

#include "core/tensor.h"

namespace veomni::ops::cuda {

void quantize_fp8_rows(const Tensor& x, Tensor& q, Tensor& scales);
void quantize_fp8_cols_transposed(const Tensor& x, Tensor& qt, Tensor& scales);
void matmul_fp8_tn(const Tensor& a, const Tensor& a_scales, const Tensor& b, const Tensor& b_scales, Tensor& out,
                   float beta);

}  // namespace veomni::ops::cuda
