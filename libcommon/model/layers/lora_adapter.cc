// LoRA adapter forward and backward through ops::matmul (alpha carries the scale), and the adapter registry.
#include "model/layers/lora_adapter.h"

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

LoraRegistry::LoraRegistry(const LoraConfig& config) : config_(config), scale_(static_cast<float>(config.scale())) {
  VEOMNI_CHECK(config.enabled(), "LoRA registry for settings of rank {}", config.rank);
}

bool LoraRegistry::offer(const std::string& module) {
  capable_.push_back(module);
  return config_.targets(module);
}

std::string lora_a_name(const std::string& module) { return module + ".lora_A.weight"; }
std::string lora_b_name(const std::string& module) { return module + ".lora_B.weight"; }

bool is_lora_param_name(const std::string& name) {
  return name.ends_with(".lora_A.weight") || name.ends_with(".lora_B.weight");
}

std::string module_of_weight(const std::string& weight_name) {
  constexpr std::string_view suffix = ".weight";
  return weight_name.ends_with(suffix) ? weight_name.substr(0, weight_name.size() - suffix.size()) : weight_name;
}

LoraAdapter LoraAdapter::attach(ParamStore& store, const Parameter& weight) {
  LoraRegistry* registry = store.lora();
  if (!registry) return {};
  const std::string module = module_of_weight(weight.name);
  if (!registry->offer(module)) return {};
  VEOMNI_CHECK(weight.shape.size() == 2, "LoRA on '{}' of {} dimensions: a projection weight is [out, in]",
               weight.name, weight.shape.size());
  const int64_t r = registry->config().rank, out = weight.shape[0], in = weight.shape[1];
  LoraAdapter adapter;
  adapter.registry_ = registry;
  adapter.a_ = store.add(lora_a_name(module), {r, in});
  adapter.b_ = store.add(lora_b_name(module), {out, r});
  return adapter;
}

LoraAdapter LoraAdapter::rows(int64_t begin, int64_t end) const {
  LoraAdapter part = *this;
  part.row_begin_ = begin;
  part.row_end_ = end;
  return part;
}

Tensor LoraAdapter::b_rows(const Tensor& full) const {
  if (row_begin_ == 0 && row_end_ < 0) return full;
  return full.slice(row_begin_, row_end_ < 0 ? full.dim(0) : row_end_);
}

Tensor LoraAdapter::forward(const Tensor& x, Tensor& y, bool save, float y_beta, const Tensor& addend) const {
  if (!active()) return {};
  const Tensor& a = a_->value;
  Tensor xa = empty_like(x, {x.dim(0), a.dim(0)});
  ops::matmul(x, false, a, true, xa);
  ops::matmul(xa, false, b_rows(b_->value), true, y, registry_->scale(), y_beta, addend);
  return save ? xa : Tensor();
}

void LoraAdapter::backward(const Tensor& x, Tensor xa, const Tensor& dy, Tensor& dx, float dx_beta) const {
  VEOMNI_CHECK(exists() && xa.defined() && x.defined(), "LoRA backward without its adapter's saved forward");
  const float scale = registry_->scale();
  const Tensor b = b_rows(b_->value);
  Tensor dyb = empty_like(dy, {dy.dim(0), b.dim(1)});
  ops::matmul(dy, false, b, false, dyb);
  if (dx.defined()) ops::matmul(dyb, false, a_->value, false, dx, scale, dx_beta);
  Tensor db = b_rows(grad_of(*b_));
  ops::matmul(dy, true, xa, false, db, scale, 1.0f);
  ops::matmul(dyb, true, x, false, grad_of(*a_), scale, 1.0f);
}

float LoraAdapter::scale() const { return registry_->scale(); }

void LoraAdapter::up_forward(const Tensor& ht, Tensor& y, float y_beta) const {
  ops::matmul(ht, true, b_rows(b_->value), true, y, registry_->scale(), y_beta);
}

void LoraAdapter::up_backward(const Tensor& ht, const Tensor& dy, Tensor& dht) const {
  ops::matmul(b_rows(b_->value), true, dy, true, dht);
  Tensor db = b_rows(grad_of(*b_));
  ops::matmul(dy, true, ht, true, db, registry_->scale(), 1.0f);
}

}  // namespace veomni
