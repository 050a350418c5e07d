// LayerNorm forward and backward through the op API.
#include "model/layers/layer_norm.h"

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

Tensor LayerNorm::forward(const Tensor& x, bool save) {
  VEOMNI_CHECK(x.ndim() == 2 && x.dim(1) == weight_->value.dim(0), "layer norm '{}' of {} over [{}]", weight_->name,
               x.describe(), weight_->value.dim(0));
  Tensor y = empty_like(x, x.shape());
  Tensor mean = Tensor::empty({x.dim(0)}, DType::F32, x.device());
  Tensor rstd = Tensor::empty({x.dim(0)}, DType::F32, x.device());
  ops::layernorm_forward(x, weight_->value, bias_->value, eps_, y, mean, rstd);
  if (save) {
    x_ = x;
    mean_ = mean;
    rstd_ = rstd;
  }
  return y;
}

Tensor LayerNorm::backward(const Tensor& dy) {
  VEOMNI_CHECK(x_.defined(), "backward of '{}' without a saved forward input", weight_->name);
  Tensor dx = empty_like(dy, dy.shape());
  ops::layernorm_backward(dy, x_, weight_->value, mean_, rstd_, dx, grad_of(*weight_), grad_of(*bias_));
  release();
  return dx;
}

void LayerNorm::release() { x_ = mean_ = rstd_ = Tensor(); }

}  // namespace veomni
