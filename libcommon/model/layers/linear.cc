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

bool Linear::fp8_applies(const Tensor& x) const { return fp8_ && fp8_linear_applies(x, weight_->value); }

// With an adapter the adapter's product is written first and the base GEMM adds onto it (beta 1): y is then written
// once by a thin GEMM and read once by a compute-bound one, instead of written by the base and read and rewritten by
// the adapter's up-projection.
// A residual rides on the first GEMM that writes y: the adapter's up-projection, or the base GEMM without one.
Linear::Output Linear::forward(const Tensor& x, bool save, const Tensor& residual) const {
  if (!adapter_.active() || !base_accumulates(x)) {
    Output result = forward_base(x, save, residual);
    result.saved.lora_xa = adapter_.forward(x, result.out, save);
    return result;
  }
  Output result;
  result.out = empty_like(x, {x.dim(0), weight_->value.dim(0)});
  const bool fused = residual.defined() && residual.dtype() == result.out.dtype();
  result.saved.lora_xa =
      adapter_.forward(x, result.out, save, fused ? 1.0f : 0.0f, fused ? residual : Tensor());
  result.saved.x = forward_base_onto(x, result.out, save).x;
  if (residual.defined() && !fused) ops::add_(result.out, residual);
  return result;
}

Linear::Output Linear::forward_base(const Tensor& x, bool save, const Tensor& residual) const {
  const Tensor& w = weight_->value;
  Tensor y = empty_like(x, {x.dim(0), w.dim(0)});
  const bool fp8 = fp8_applies(x);
  const bool fused = residual.defined() && residual.dtype() == y.dtype() && !fp8;
  if (fp8)
    fp8_linear_forward(x, w, y);
  else if (fused)
    ops::matmul(x, false, w, true, y, 1.0f, 1.0f, residual);
  else
    ops::matmul(x, false, w, true, y);
  if (residual.defined() && !fused) ops::add_(y, residual);
  return {y, {save ? x : Tensor(), Tensor()}};
}

Linear::Saved Linear::forward_base_onto(const Tensor& x, Tensor& y, bool save) const {
  VEOMNI_CHECK(base_accumulates(x), "'{}': an FP8 base GEMM does not add onto its output", weight_->name);
  ops::matmul(x, false, weight_->value, true, y, 1.0f, 1.0f);
  return {save ? x : Tensor(), Tensor()};
}

void Linear::forward_accumulate(const Tensor& x, Tensor& y) const {
  const Tensor& w = weight_->value;
  if (fp8_applies(x)) {
    ops::add_(y, forward_base(x, false).out);
  } else {
    ops::matmul(x, false, w, true, y, 1.0f, 1.0f);
  }
  adapter_.forward(x, y, false);
}

// Takes the saved input by value: it is freed on return. The adapter's part of dx adds onto dy W already there, or
// (lora_dx_beta 0) is written first, dy W to be added after.
void Linear::parameter_grads(Saved saved, const Tensor& dy, Tensor& dx, float lora_dx_beta) const {
  VEOMNI_CHECK(saved.x.defined(), "backward of '{}' without a saved forward input", weight_->name);
  if (saved.lora_xa.defined()) adapter_.backward(saved.x, std::move(saved.lora_xa), dy, dx, lora_dx_beta);
  if (weight_->trainable) ops::matmul(dy, true, saved.x, false, grad_of(*weight_), 1.0f, 1.0f);
}

void Linear::input_grad(const Tensor& dy, Tensor& dx, float beta) const {
  const Tensor& w = weight_->value;
  if (fp8_applies(dy))
    fp8_linear_input_grad(dy, w, dx, beta);
  else
    ops::matmul(dy, false, w, false, dx, 1.0f, beta);
}

// With an adapter its part of dx is written first and dy W adds onto it, as in the forward.
Tensor Linear::backward(Saved&& saved, const Tensor& dy) const {
  Tensor dx = empty_like(dy, {dy.dim(0), weight_->value.dim(1)});
  if (saved.lora_xa.defined()) {
    parameter_grads(std::move(saved), dy, dx, 0.0f);
    input_grad(dy, dx, 1.0f);
    return dx;
  }
  input_grad(dy, dx, 0.0f);
  parameter_grads(std::move(saved), dy, dx);
  return dx;
}

void Linear::backward_accumulate(Saved&& saved, const Tensor& dy, Tensor& dx) const {
  input_grad(dy, dx, 1.0f);
  parameter_grads(std::move(saved), dy, dx);
}

}  // namespace veomni
