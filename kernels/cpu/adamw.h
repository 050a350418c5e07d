// CPU AdamW step in torch.optim.AdamW's arithmetic (kernels/ops.h).
#pragma once
#include <cstdint>

#include <vector>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace veomni::ops::cpu {

void adamw_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, double lr, double beta1,
                double beta2, double eps, double weight_decay, int64_t step);
void adamw_step_multi(const std::vector<AdamWTensors>& slots, double lr, double beta1, double beta2, double eps,
                      int64_t step, float grad_scale);

}  // namespace veomni::ops::cpu
