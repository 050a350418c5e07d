// RMSNorm forward and backward through the op API.
#include "model/layers/rmsnorm.h"

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

RmsNorm::Output RmsNorm::forward(const Tensor& x, bool save) const {
  const int64_t d = weight_->value.dim(0);
  Tensor x2 = x.view({-1, d});
  Tensor y = empty_like(x2, x2.shape());
  Tensor rstd = Tensor::empty({x2.dim(0)}, DType::F32, x.device());
  ops::rmsnorm_forward(x2, weight_->value, eps_, y, rstd);
  Output result{y.view(x.shape()), {}};
  if (save) result.saved = {x2, rstd};
  return result;
}

Tensor RmsNorm::backward(Saved&& saved, const Tensor& dy, const Tensor& residual) const {
  const Saved s = std::move(saved);
  VEOMNI_CHECK(s.x.defined(), "backward of '{}' without a saved forward input", weight_->name);
  Tensor dy2 = dy.view(s.x.shape());
  Tensor dx = empty_like(dy2, dy2.shape());
  Tensor dweight = grad_if_trainable(*weight_);
  // The op adds a residual of dx's dtype in its pass; another dtype is added after it.
  const bool fused = residual.defined() && residual.dtype() == dx.dtype();
  ops::rmsnorm_backward(dy2, s.x, weight_->value, s.rstd, dx, dweight,
                        fused ? residual.view(s.x.shape()) : Tensor());
  if (residual.defined() && !fused) ops::add_(dx, residual.view(s.x.shape()));
  return dx.view(dy.shape());
}

}  // namespace veomni
