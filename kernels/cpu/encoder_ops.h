// CPU encoder ops: LayerNorm, GELU, bias add and gradient, im2col / col2im (kernels/ops.h).
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace veomni::ops::cpu {

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y, Tensor& mean,
                       Tensor& rstd);
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor& dx, Tensor& dweight, Tensor& dbias);
void gelu_forward(const Tensor& x, GeluKind kind, Tensor& y);
void gelu_backward(const Tensor& dy, const Tensor& x, GeluKind kind, Tensor& dx);
void add_bias_(Tensor& y, const Tensor& bias);
void bias_grad(const Tensor& dy, Tensor& dbias);
void im2col_2d(const Tensor& x, int64_t kh, int64_t kw, int64_t stride, int64_t pad, Tensor& cols);
void col2im_2d(const Tensor& dcols, int64_t kh, int64_t kw, int64_t stride, int64_t pad, Tensor& dx);

}  // namespace veomni::ops::cpu
