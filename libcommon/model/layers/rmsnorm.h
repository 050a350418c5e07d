// RMSNorm over the last dimension with a [D] weight (decoder norms, final norm, per-head q/k norms).
#pragma once
#include "core/tensor.h"
#include "model/param.h"

namespace veomni {

class RmsNorm {
 public:
  RmsNorm(Parameter* weight, double eps) : weight_(weight), eps_(static_cast<float>(eps)) {}

  // x viewed [N, D] -> y of x's shape; keeps x and the f32 rstd when save.
  Tensor forward(const Tensor& x, bool save);
  // Returns dx (dy's shape) and accumulates the weight gradient.
  Tensor backward(const Tensor& dy);
  void release();

 private:
  Parameter* weight_;
  float eps_;
  Tensor x_;
  Tensor rstd_;
};

}  // namespace veomni
