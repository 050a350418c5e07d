// Biased linear forward and backward through ops::matmul, add_bias_ and bias_grad.
#include "model/layers/biased_linear.h"

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

BiasedLinear::BiasedLinear(ParamStore& store, const std::string& module, int64_t out, int64_t in)
    : weight_(store.add(module + ".weight", {out, in})), bias_(nullptr), row_begin_(0), row_end_(-1) {
  adapter_ = LoraAdapter::attach(store, *weight_);
  bias_ = store.add(module + ".bias", {out});
}

Tensor BiasedLinear::rows(const Tensor& full) const {
  if (row_begin_ == 0 && row_end_ < 0) return full;
  return full.slice(row_begin_, row_end_ < 0 ? full.dim(0) : row_end_);
}

BiasedLinear::Output BiasedLinear::forward(const Tensor& x, bool save) const {
  const Tensor w = rows(weight_->value);
  Tensor y = empty_like(x, {x.dim(0), w.dim(0)});
  ops::matmul(x, false, w, true, y);
  ops::add_bias_(y, rows(bias_->value));
  Tensor xa = adapter_.forward(x, y, save);
  return {y, {save ? x : Tensor(), xa}};
}

// Takes the saved input by value: it is freed on return. dx already holds dy W.
void BiasedLinear::parameter_grads(Saved saved, const Tensor& dy, Tensor& dx) const {
  VEOMNI_CHECK(saved.x.defined(), "backward of '{}' without a saved forward input", weight_->name);
  if (saved.lora_xa.defined()) adapter_.backward(saved.x, std::move(saved.lora_xa), dy, dx);
  if (weight_->trainable) {
    Tensor dw = rows(grad_of(*weight_));
    ops::matmul(dy, true, saved.x, false, dw, 1.0f, 1.0f);
  }
  if (bias_->trainable) {
    Tensor db = rows(grad_of(*bias_));
    ops::bias_grad(dy, db);
  }
}

Tensor BiasedLinear::backward(Saved&& saved, const Tensor& dy) const {
  const Tensor w = rows(weight_->value);
  Tensor dx = empty_like(dy, {dy.dim(0), w.dim(1)});
  ops::matmul(dy, false, w, false, dx);
  parameter_grads(std::move(saved), dy, dx);
  return dx;
}

void BiasedLinear::backward_accumulate(Saved&& saved, const Tensor& dy, Tensor& dx) const {
  ops::matmul(dy, false, rows(weight_->value), false, dx, 1.0f, 1.0f);
  parameter_grads(std::move(saved), dy, dx);
}

}  // namespace veomni
