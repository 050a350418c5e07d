// Linear forward and backward through ops::matmul.
#include "model/layers/linear.h"

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

Tensor Linear::forward(const Tensor& x, bool save) {
  const Tensor& w = weight_->value;
  Tensor y = empty_like(x, {x.dim(0), w.dim(0)});
  ops::matmul(x, false, w, true, y);
  if (save) x_ = x;
  return y;
}

void Linear::weight_grad(const Tensor& dy) {
  VEOMNI_CHECK(x_.defined(), "backward of '{}' without a saved forward input", weight_->name);
  ops::matmul(dy, true, x_, false, grad_of(*weight_), 1.0f, 1.0f);
  x_ = Tensor();
}

Tensor Linear::backward(const Tensor& dy) {
  const Tensor& w = weight_->value;
  Tensor dx = empty_like(dy, {dy.dim(0), w.dim(1)});
  ops::matmul(dy, false, w, false, dx);
  weight_grad(dy);
  return dx;
}

void Linear::backward_accumulate(const Tensor& dy, Tensor& dx) {
  ops::matmul(dy, false, weight_->value, false, dx, 1.0f, 1.0f);
  weight_grad(dy);
}

}  // namespace veomni
