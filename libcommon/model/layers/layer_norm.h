// LayerNorm over the last dimension with [D] weight and bias (vision blocks and patch mergers).
#pragma once
#include "core/tensor.h"
#include "model/param.h"

namespace veomni {

class LayerNorm {
 public:
  LayerNorm(Parameter* weight, Parameter* bias, double eps)
      : weight_(weight), bias_(bias), eps_(static_cast<float>(eps)) {}

  // x [N, D] -> y [N, D]; keeps x and the f32 mean/rstd when save.
  Tensor forward(const Tensor& x, bool save);
  // Returns dx and accumulates the weight and bias gradients.
  Tensor backward(const Tensor& dy);
  void release();

 private:
  Parameter* weight_;
  Parameter* bias_;
  float eps_;
  Tensor x_, mean_, rstd_;
};

}  // namespace veomni
