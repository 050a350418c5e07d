// Linear forward and backward through ops::matmul.
#include "model/layers/linear.h"

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

Linear::Linear(ParamStore& store, const std::string& name, const Shape& shape) : weight_(store.add(name, shape)) {
  adapter_ = LoraAdapter::attach(store, *weight_);
}

Linear::Output Linear::forward(const Tensor& x, bool save) const {
  Output result = forward_base(x, save);
  result.saved.lora_xa = adapter_.forward(x, result.out, save);
  return result;
}

Linear::Output Linear::forward_base(const Tensor& x, bool save) const {
  const Tensor& w = weight_->value;
  Tensor y = empty_like(x, {x.dim(0), w.dim(0)});
  ops::matmul(x, false, w, true, y);
  return {y, {save ? x : Tensor(), Tensor()}};
}

// Takes the saved input by value: it is freed on return. dx already holds dy W.
void Linear::parameter_grads(Saved saved, const Tensor& dy, Tensor& dx) const {
  VEOMNI_CHECK(saved.x.defined(), "backward of '{}' without a saved forward input", weight_->name);
  if (saved.lora_xa.defined()) adapter_.backward(saved.x, std::move(saved.lora_xa), dy, dx);
  if (weight_->trainable) ops::matmul(dy, true, saved.x, false, grad_of(*weight_), 1.0f, 1.0f);
}

Tensor Linear::backward(Saved&& saved, const Tensor& dy) const {
  const Tensor& w = weight_->value;
  Tensor dx = empty_like(dy, {dy.dim(0), w.dim(1)});
  ops::matmul(dy, false, w, false, dx);
  parameter_grads(std::move(saved), dy, dx);
  return dx;
}

void Linear::backward_accumulate(Saved&& saved, const Tensor& dy, Tensor& dx) const {
  ops::matmul(dy, false, weight_->value, false, dx, 1.0f, 1.0f);
  parameter_grads(std::move(saved), dy, dx);
}

}  // namespace veomni
