// CPU AdamW step in torch.optim.AdamW's arithmetic (kernels/ops.h).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace veomni::ops::cpu {

void adamw_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, float lr, float beta1,
                float beta2, float eps, float weight_decay, int64_t step);

}  // namespace veomni::ops::cpu
