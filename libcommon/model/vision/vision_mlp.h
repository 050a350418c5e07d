// Two biased linear layers around a GELU: the vision blocks' MLP and the patch mergers' projection.
#pragma once
#include <string>

#include "core/tensor.h"
#include "kernels/ops.h"
#include "model/param.h"
#include "model/layers/biased_linear.h"

namespace veomni {

class VisionMlp {
 public:
  struct Saved {
    BiasedLinear::Saved fc1, fc2;
    Tensor pre_activation;  // fc1's output
  };
  struct Output {
    Tensor out;
    Saved saved;
  };

  // fc1 [mid, in] + [mid], fc2 [out, mid] + [out], already registered by the owner (their names differ).
  VisionMlp(Parameter* fc1_weight, Parameter* fc1_bias, Parameter* fc2_weight, Parameter* fc2_bias, ops::GeluKind gelu)
      : fc1_(fc1_weight, fc1_bias), fc2_(fc2_weight, fc2_bias), gelu_(gelu) {}

  // x [N, in] -> fc2(gelu(fc1(x))) [N, out]; saved is empty unless save.
  Output forward(const Tensor& x, bool save) const;
  Tensor backward(Saved&& saved, const Tensor& dy) const;

 private:
  BiasedLinear fc1_, fc2_;
  ops::GeluKind gelu_;
};

}  // namespace veomni
