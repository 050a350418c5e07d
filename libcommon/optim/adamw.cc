// AdamW driver: decides decay per parameter and updates every slot with one multi-tensor adamw_step.
#include "optim/adamw.h"

#include "kernels/ops.h"

namespace veomni {

bool parameter_uses_weight_decay(const std::string& hf_name) { return WeightDecayRule().decays(hf_name); }

namespace {

void check_gradient(const std::string& name, const Tensor& master, const Tensor& grad) {
  VEOMNI_CHECK(master.dtype() == DType::F32 && grad.dtype() == DType::F32, "AdamW slot {}: master {} grad {}", name,
               master.describe(), grad.describe());
  VEOMNI_CHECK(master.numel() == grad.numel(), "AdamW slot {}: master {} grad {}", name, master.describe(),
               grad.describe());
}

}  // namespace

void AdamW::add_slot(const std::string& name, Tensor master, const Tensor* grad) {
  VEOMNI_CHECK(grad != nullptr, "AdamW slot {}: no gradient", name);
  if (grad->defined()) check_gradient(name, master, *grad);
  OptimizerSlot slot;
  slot.name = name;
  slot.exp_avg = Tensor::zeros(master.shape(), DType::F32, master.device());
  slot.exp_avg_sq = Tensor::zeros(master.shape(), DType::F32, master.device());
  slot.master = std::move(master);
  slot.grad = grad;
  slot.weight_decay = options_.decay_rule.decays(name);
  slots_.push_back(std::move(slot));
}

void AdamW::step(double lr, float grad_scale) {
  ++step_;
  std::vector<ops::AdamWTensors> tensors;
  for (OptimizerSlot& slot : slots_) {
    if (slot.master.numel() == 0) continue;  // an FSDP rank may own no elements of a tiny parameter
    VEOMNI_CHECK(slot.grad->defined(), "AdamW slot {}: the gradient is not allocated at step time", slot.name);
    check_gradient(slot.name, slot.master, *slot.grad);
    tensors.push_back({&slot.master, slot.grad, &slot.exp_avg, &slot.exp_avg_sq,
                       slot.weight_decay ? options_.weight_decay : 0.0});
  }
  // All slots in one pass: on a GPU one launch instead of one per parameter.
  ops::adamw_step_multi(tensors, lr, options_.beta1, options_.beta2, options_.eps, step_, grad_scale);
}

}  // namespace veomni
