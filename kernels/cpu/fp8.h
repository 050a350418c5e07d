// CPU FP8 ops (kernels/fp8_ops.h): E4M3 emulated exactly in f32, the reference of the CUDA ones.
#pragma once

#include "core/tensor.h"

namespace veomni::ops::cpu {

void quantize_fp8_rows(const Tensor& x, Tensor& q, Tensor& scales);
void quantize_fp8_cols_transposed(const Tensor& x, Tensor& qt, Tensor& scales);
void matmul_fp8_tn(const Tensor& a, const Tensor& a_scales, const Tensor& b, const Tensor& b_scales, Tensor& out,
                   float beta);

}  // namespace veomni::ops::cpu
