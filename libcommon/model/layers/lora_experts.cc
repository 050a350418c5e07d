// Expert LoRA through grouped GEMMs (independent: the expert GEMMs' groups) or plain GEMMs over every routed row
// (shared). The grouped ops have no alpha: the scale is applied to the rank-r intermediates.
#include "model/layers/lora_experts.h"

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

ExpertLora ExpertLora::attach(ParamStore& store, const Parameter& weight) {
  LoraRegistry* registry = store.lora();
  if (!registry || !registry->offer(weight.name)) return {};
  VEOMNI_CHECK(weight.shape.size() == 3 && weight.is_expert, "expert LoRA on '{}', which is no [E, out, in] expert "
               "tensor", weight.name);
  const int64_t r = registry->config().rank_of(weight.name), e = weight.shape[0], out = weight.shape[1],
                in = weight.shape[2];
  ExpertLora adapter;
  adapter.registry_ = registry;
  adapter.scale_ = static_cast<float>(registry->config().scale_of(weight.name));
  adapter.shared_ = registry->config().share_expert_lora;
  if (adapter.shared_) {
    adapter.a_ = store.add(lora_a_name(weight.name), {r, in});
    adapter.b_ = store.add(lora_b_name(weight.name), {out, r});
    return adapter;
  }
  adapter.a_ = store.add(lora_a_name(weight.name), {e, r, in}, true);
  adapter.b_ = store.add(lora_b_name(weight.name), {e, out, r}, true);
  for (Parameter* p : {adapter.a_, adapter.b_}) {
    p->local_begin = weight.local_begin;
    p->local_end = weight.local_end;
  }
  return adapter;
}

Tensor ExpertLora::forward(const Tensor& x, const std::vector<int64_t>& counts, Tensor& y, bool save) const {
  if (!active()) return {};
  const Tensor& a = a_->value;
  const Tensor& b = b_->value;
  Tensor xa = empty_like(x, {x.dim(0), shared_ ? a.dim(0) : a.dim(1)});
  if (shared_) {
    ops::matmul(x, false, a, true, xa);
    ops::matmul(xa, false, b, true, y, scale_, 1.0f);
  } else {
    ops::grouped_matmul(x, a, true, counts, xa);
    Tensor delta = empty_like(y, y.shape());
    ops::grouped_matmul(xa, b, true, counts, delta);
    ops::add_(y, delta, scale_);
  }
  return save ? xa : Tensor();
}

void ExpertLora::backward(const Tensor& x, Tensor xa, const Tensor& dy, const std::vector<int64_t>& counts,
                          Tensor& dx) const {
  VEOMNI_CHECK(exists() && xa.defined() && x.defined(), "expert LoRA backward without its saved forward");
  const float scale = scale_;
  if (shared_) {
    Tensor dyb = empty_like(dy, {dy.dim(0), b_->value.dim(1)});
    ops::matmul(dy, false, b_->value, false, dyb);
    ops::matmul(dyb, false, a_->value, false, dx, scale, 1.0f);
    ops::matmul(dy, true, xa, false, grad_of(*b_), scale, 1.0f);
    ops::matmul(dyb, true, x, false, grad_of(*a_), scale, 1.0f);
    return;
  }
  // dyb = scale * dy B_e per row, then dx += dyb A_e, dA_e += dyb_e^T x_e, dB_e += dy_e^T (scale * xa_e).
  Tensor dyb = empty_like(dy, {dy.dim(0), b_->value.dim(2)});
  ops::grouped_matmul(dy, b_->value, false, counts, dyb);
  ops::scale_(dyb, scale);
  Tensor dx_part = empty_like(dx, dx.shape());
  ops::grouped_matmul(dyb, a_->value, false, counts, dx_part);
  ops::add_(dx, dx_part);
  ops::grouped_matmul_weight_grad(dyb, x, counts, grad_of(*a_), true);
  ops::scale_(xa, scale);
  ops::grouped_matmul_weight_grad(dy, xa, counts, grad_of(*b_), true);
}

}  // namespace veomni
