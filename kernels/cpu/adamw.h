// CPU AdamW step in torch.optim.AdamW's arithmetic (kernels/ops.h).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace veomni::ops::cpu {

void adamw_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, double lr, double beta1,
                double beta2, double eps, double weight_decay, int64_t step);

}  // namespace veomni::ops::cpu
