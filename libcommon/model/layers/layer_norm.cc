// LayerNorm forward and backward through the op API.
#include "model/layers/layer_norm.h"

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

LayerNorm::Output LayerNorm::forward(const Tensor& x, bool save) const {
  VEOMNI_CHECK(x.ndim() == 2 && x.dim(1) == weight_->value.dim(0), "layer norm '{}' of {} over [{}]", weight_->name,
               x.describe(), weight_->value.dim(0));
  Tensor y = empty_like(x, x.shape());
  Tensor mean = Tensor::empty({x.dim(0)}, DType::F32, x.device());
  Tensor rstd = Tensor::empty({x.dim(0)}, DType::F32, x.device());
  ops::layernorm_forward(x, weight_->value, bias_->value, eps_, y, mean, rstd);
  Output result{y, {}};
  if (save) result.saved = {x, mean, rstd};
  return result;
}

Tensor LayerNorm::backward(Saved&& saved, const Tensor& dy) const {
  const Saved s = std::move(saved);
  VEOMNI_CHECK(s.x.defined(), "backward of '{}' without a saved forward input", weight_->name);
  Tensor dx = empty_like(dy, dy.shape());
  Tensor dweight = grad_or_scratch(*weight_), dbias = grad_or_scratch(*bias_);
  ops::layernorm_backward(dy, s.x, weight_->value, s.mean, s.rstd, dx, dweight, dbias);
  return dx;
}

}  // namespace veomni
