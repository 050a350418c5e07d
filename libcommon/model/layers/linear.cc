// Linear forward and backward through ops::matmul, or the FP8 GEMMs of model/layers/fp8_linear.h.
#include "model/layers/linear.h"

#include "kernels/ops.h"
#include "model/layers/common.h"
#include "model/layers/fp8_linear.h"

namespace veomni {

Linear::Linear(ParamStore& store, const std::string& name, const Shape& shape, bool fp8)
    : weight_(store.add(name, shape)), fp8_(fp8) {
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
  if (fp8_ && fp8_linear_applies(x, w))
    fp8_linear_forward(x, w, y);
  else
    ops::matmul(x, false, w, true, y);
  return {y, {save ? x : Tensor(), Tensor()}};
}

void Linear::forward_accumulate(const Tensor& x, Tensor& y) const {
  const Tensor& w = weight_->value;
  if (fp8_ && fp8_linear_applies(x, w)) {
    ops::add_(y, forward_base(x, false).out);
  } else {
    ops::matmul(x, false, w, true, y, 1.0f, 1.0f);
  }
  adapter_.forward(x, y, false);
}

// Takes the saved input by value: it is freed on return. dx already holds dy W.
void Linear::parameter_grads(Saved saved, const Tensor& dy, Tensor& dx) const {
  VEOMNI_CHECK(saved.x.defined(), "backward of '{}' without a saved forward input", weight_->name);
  if (saved.lora_xa.defined()) adapter_.backward(saved.x, std::move(saved.lora_xa), dy, dx);
  if (weight_->trainable) ops::matmul(dy, true, saved.x, false, grad_of(*weight_), 1.0f, 1.0f);
}

void Linear::input_grad(const Tensor& dy, Tensor& dx, float beta) const {
  const Tensor& w = weight_->value;
  if (fp8_ && fp8_linear_applies(dy, w))
    fp8_linear_input_grad(dy, w, dx, beta);
  else
    ops::matmul(dy, false, w, false, dx, 1.0f, beta);
}

Tensor Linear::backward(Saved&& saved, const Tensor& dy) const {
  Tensor dx = empty_like(dy, {dy.dim(0), weight_->value.dim(1)});
  input_grad(dy, dx, 0.0f);
  parameter_grads(std::move(saved), dy, dx);
  return dx;
}

void Linear::backward_accumulate(Saved&& saved, const Tensor& dy, Tensor& dx) const {
  input_grad(dy, dx, 1.0f);
  parameter_grads(std::move(saved), dy, dx);
}

}  // namespace veomni
