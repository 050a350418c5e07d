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

  // fc1 [mid, in] + [mid], fc2 [out, mid] + [out] (with their LoRA adapters), registered by the owner (their
  // names differ).
  VisionMlp(BiasedLinear fc1, BiasedLinear fc2, ops::GeluKind gelu) : fc1_(fc1), fc2_(fc2), gelu_(gelu) {}

  // x [N, in] -> fc2(gelu(fc1(x))) [N, out]; saved is empty unless save.
  Output forward(const Tensor& x, bool save) const;
  Tensor backward(Saved&& saved, const Tensor& dy) const;

 private:
  BiasedLinear fc1_, fc2_;
  ops::GeluKind gelu_;
};

}  // namespace veomni
