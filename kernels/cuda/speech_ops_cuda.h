// The CUDA backend of the speech ops of kernels/ops.h (kernels/cuda/speech_ops.cu), with the CPU backend's
// signatures; kernels/speech_dispatch.cc checks shapes, dtypes and devices before calling them.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace veomni::ops::cuda {

void conv1d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t dilation,
                    int64_t groups, int64_t pad_left, int64_t pad_right, Tensor& out);
void conv_transpose1d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
                              int64_t trim_left, Tensor& out);
void snake_beta_forward(const Tensor& x, const Tensor& alpha, const Tensor& beta, Tensor& y);
void scale_columns_(Tensor& x, const Tensor& scale);
void silu_forward(const Tensor& x, Tensor& y);
void sigmoid_gated_add_(Tensor& dst, const Tensor& gate, const Tensor& src);
void clamp_(Tensor& x, float lo, float hi);
void sliding_window_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, int64_t window, float scale,
                                      Tensor& out);

}  // namespace veomni::ops::cuda
