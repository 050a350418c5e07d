// RMSNorm forward and backward through the op API.
#include "model/layers/rmsnorm.h"

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

Tensor RmsNorm::forward(const Tensor& x, bool save) {
  const int64_t d = weight_->value.dim(0);
  Tensor x2 = x.view({-1, d});
  Tensor y = empty_like(x2, x2.shape());
  Tensor rstd = Tensor::empty({x2.dim(0)}, DType::F32, x.device());
  ops::rmsnorm_forward(x2, weight_->value, eps_, y, rstd);
  if (save) {
    x_ = x2;
    rstd_ = rstd;
  }
  return y.view(x.shape());
}

Tensor RmsNorm::backward(const Tensor& dy) {
  VEOMNI_CHECK(x_.defined(), "backward of '{}' without a saved forward input", weight_->name);
  Tensor dy2 = dy.view(x_.shape());
  Tensor dx = empty_like(dy2, dy2.shape());
  ops::rmsnorm_backward(dy2, x_, weight_->value, rstd_, dx, grad_of(*weight_));
  release();
  return dx.view(dy.shape());
}

void RmsNorm::release() {
  x_ = Tensor();
  rstd_ = Tensor();
}

}  // namespace veomni
