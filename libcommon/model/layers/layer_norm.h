// LayerNorm over the last dimension with [D] weight and bias (vision blocks and patch mergers).
#pragma once
#include "core/tensor.h"
#include "model/param.h"

namespace veomni {

class LayerNorm {
 public:
  struct Saved {
    Tensor x;           // the input [N, D]
    Tensor mean, rstd;  // [N] f32
  };
  struct Output {
    Tensor out;
    Saved saved;
  };

  LayerNorm(Parameter* weight, Parameter* bias, double eps)
      : weight_(weight), bias_(bias), eps_(static_cast<float>(eps)) {}

  // x [N, D] -> out [N, D]; saved is empty unless save.
  Output forward(const Tensor& x, bool save) const;
  // Returns dx and accumulates the weight and bias gradients.
  Tensor backward(Saved&& saved, const Tensor& dy) const;

 private:
  Parameter* weight_;
  Parameter* bias_;
  float eps_;
};

}  // namespace veomni
