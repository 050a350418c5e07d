// The per-step scalars of torch.optim.AdamW, computed once in double from the hyper-parameters (as torch does with
// Python floats) and shared by the CPU and CUDA kernels so both update with the same f32 factors.
#pragma once
#include <cmath>
#include <cstdint>

namespace veomni::ops {

struct AdamWFactors {
  float decay;            // 1 - lr * weight_decay
  float one_minus_beta1;  // the lerp weight of exp_avg
  float beta2;
  float one_minus_beta2;
  float bias2_sqrt;       // sqrt(1 - beta2^t)
  float eps;
  float neg_step_size;    // -lr / (1 - beta1^t)
};

inline AdamWFactors adamw_factors(double lr, double beta1, double beta2, double eps, double weight_decay,
                                  int64_t step) {
  const double t = static_cast<double>(step);
  const double bias1 = 1.0 - std::pow(beta1, t);
  const double bias2 = 1.0 - std::pow(beta2, t);
  return {static_cast<float>(1.0 - lr * weight_decay), static_cast<float>(1.0 - beta1), static_cast<float>(beta2),
          static_cast<float>(1.0 - beta2),            static_cast<float>(std::sqrt(bias2)), static_cast<float>(eps),
          static_cast<float>(-(lr / bias1))};
}

}  // namespace veomni::ops
