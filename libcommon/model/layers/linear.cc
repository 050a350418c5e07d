// Linear forward and backward through ops::matmul.
#include "model/layers/linear.h"

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

Linear::Output Linear::forward(const Tensor& x, bool save) const {
  const Tensor& w = weight_->value;
  Tensor y = empty_like(x, {x.dim(0), w.dim(0)});
  ops::matmul(x, false, w, true, y);
  return {y, {save ? x : Tensor()}};
}

// Takes the saved input by value: it is freed on return.
void Linear::weight_grad(Saved saved, const Tensor& dy) const {
  VEOMNI_CHECK(saved.x.defined(), "backward of '{}' without a saved forward input", weight_->name);
  ops::matmul(dy, true, saved.x, false, grad_of(*weight_), 1.0f, 1.0f);
}

Tensor Linear::backward(Saved&& saved, const Tensor& dy) const {
  const Tensor& w = weight_->value;
  Tensor dx = empty_like(dy, {dy.dim(0), w.dim(1)});
  ops::matmul(dy, false, w, false, dx);
  weight_grad(std::move(saved), dy);
  return dx;
}

void Linear::backward_accumulate(Saved&& saved, const Tensor& dy, Tensor& dx) const {
  ops::matmul(dy, false, weight_->value, false, dx, 1.0f, 1.0f);
  weight_grad(std::move(saved), dy);
}

}  // namespace veomni
