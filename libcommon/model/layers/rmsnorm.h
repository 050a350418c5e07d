// RMSNorm over the last dimension with a [D] weight (decoder norms, final norm, per-head q/k norms).
#pragma once
#include "core/tensor.h"
#include "model/param.h"

namespace veomni {

class RmsNorm {
 public:
  struct Saved {
    Tensor x;     // the input viewed [N, D]
    Tensor rstd;  // [N] f32
  };
  struct Output {
    Tensor out;
    Saved saved;
  };

  RmsNorm(Parameter* weight, double eps) : weight_(weight), eps_(static_cast<float>(eps)) {}

  // x viewed [N, D] -> out of x's shape; saved is empty unless save.
  Output forward(const Tensor& x, bool save) const;
  // Returns dx (dy's shape) and accumulates the weight gradient unless the weight is frozen. A defined residual (dy's
  // shape) is added to dx, in the same pass when it has dx's dtype: a pre-norm block's input gradient with its skip
  // connection's.
  Tensor backward(Saved&& saved, const Tensor& dy, const Tensor& residual = Tensor()) const;

  // For ops that fuse the normalisation with what follows it (a cached step's qkv_norm_rope_cache_write).
  const Tensor& weight_value() const { return weight_->value; }
  float eps() const { return eps_; }
  bool trainable() const { return weight_->trainable; }

 private:
  Parameter* weight_;
  float eps_;
};

}  // namespace veomni
