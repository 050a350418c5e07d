// CPU RMSNorm forward and backward (kernels/ops.h).
#pragma once
#include "core/tensor.h"

namespace veomni::ops::cpu {

void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor& rstd);
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                      Tensor& dweight);

}  // namespace veomni::ops::cpu
