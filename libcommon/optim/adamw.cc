// AdamW driver: decides decay per parameter and updates every slot with one multi-tensor adamw_step (offloaded: one
// per chunk of the host's slots as their gradients arrive).
#include "optim/adamw.h"

#include "kernels/ops.h"

namespace veomni {

bool parameter_uses_weight_decay(const std::string& hf_name) { return WeightDecayRule().decays(hf_name); }

DType moment_dtype_of_optimizer(const std::string& type) {
  if (type == "adamw") return DType::F32;
  VEOMNI_INPUT_CHECK(type == "anyprecision_adamw",
                     "train.optimizer.type '{}' is not supported (adamw: float32 moments, anyprecision_adamw: "
                     "bfloat16 moments)", type);
  return DType::BF16;
}

namespace {

void check_gradient(const std::string& name, const Tensor& master, const Tensor& grad) {
  VEOMNI_CHECK(master.dtype() == DType::F32 && grad.dtype() == DType::F32, "AdamW slot {}: master {} grad {}", name,
               master.describe(), grad.describe());
  VEOMNI_CHECK(master.numel() == grad.numel(), "AdamW slot {}: master {} grad {}", name, master.describe(),
               grad.describe());
}

// The flat elements [begin, begin + length) of a contiguous tensor.
Tensor flat_range(const Tensor& t, int64_t begin, int64_t length) {
  return t.view({t.numel()}).slice(begin, begin + length);
}

}  // namespace

void AdamW::add_slot(const std::string& name, Tensor master, const Tensor* grad, OffloadTarget offload) {
  VEOMNI_CHECK(grad != nullptr, "AdamW slot {}: no gradient", name);
  if (grad->defined()) check_gradient(name, master, *grad);
  VEOMNI_CHECK(slots_.empty() || offload.stream == stream_, "AdamW slot {}: offloaded {} but the slots before {}",
               name, offload.enabled(), stream_ != nullptr);
  VEOMNI_CHECK(!offload.enabled() || (master.is_cpu() && offload.compute.numel() == master.numel()),
               "AdamW slot {}: offloaded master {} with compute copy {}", name, master.describe(),
               offload.compute.describe());
  VEOMNI_CHECK(offload.enabled() || !offload.compute.defined() ||
                   (offload.compute.device() == master.device() && offload.compute.numel() == master.numel()),
               "AdamW slot {}: master {} with compute copy {}", name, master.describe(), offload.compute.describe());
  VEOMNI_CHECK(options_.moment_dtype == DType::F32 || options_.moment_dtype == DType::BF16,
               "AdamW moments in {}", dtype_name(options_.moment_dtype));
  stream_ = offload.stream;
  OptimizerSlot slot;
  slot.name = name;
  slot.exp_avg = Tensor::zeros(master.shape(), options_.moment_dtype, master.device());
  slot.exp_avg_sq = Tensor::zeros(master.shape(), options_.moment_dtype, master.device());
  slot.master = std::move(master);
  slot.grad = grad;
  slot.weight_decay = options_.decay_rule.decays(name);
  slot.compute = std::move(offload.compute);
  slots_.push_back(std::move(slot));
}

int64_t AdamW::moment_bytes() const {
  int64_t bytes = 0;
  for (const OptimizerSlot& slot : slots_)
    bytes += static_cast<int64_t>(slot.exp_avg.nbytes() + slot.exp_avg_sq.nbytes());
  return bytes;
}

void AdamW::step(double lr, float grad_scale) {
  ++step_;
  if (stream_) {
    step_streamed(lr, grad_scale);
    return;
  }
  std::vector<ops::AdamWTensors> tensors;
  for (OptimizerSlot& slot : slots_) {
    if (slot.master.numel() == 0) continue;  // an FSDP rank may own no elements of a tiny parameter
    VEOMNI_CHECK(slot.grad->defined(), "AdamW slot {}: the gradient is not allocated at step time", slot.name);
    check_gradient(slot.name, slot.master, *slot.grad);
    tensors.push_back({&slot.master, slot.grad, &slot.exp_avg, &slot.exp_avg_sq,
                       slot.weight_decay ? options_.weight_decay : 0.0,
                       slot.compute.defined() ? &slot.compute : nullptr});
  }
  // All slots in one pass: on a GPU one launch instead of one per parameter.
  ops::adamw_step_multi(tensors, lr, options_.beta1, options_.beta2, options_.eps, step_, grad_scale);
}

// Each element gets the one update of the device's step, with the same factors (the CPU kernel is the CUDA one's
// twin bit for bit); only the grouping into launches differs, which no element sees. Under a 16-bit compute dtype the
// update writes the staged compute copies itself (an f32 one is a plain copy, which the stream makes).
void AdamW::step_streamed(double lr, float grad_scale) {
  std::vector<OffloadStream::Item> items;
  std::vector<OptimizerSlot*> stepped;
  for (OptimizerSlot& slot : slots_) {
    if (slot.master.numel() == 0) continue;
    VEOMNI_CHECK(slot.grad->defined(), "AdamW slot {}: the gradient is not allocated at step time", slot.name);
    check_gradient(slot.name, slot.master, *slot.grad);
    items.push_back({slot.master.view({slot.master.numel()}), slot.compute.view({slot.compute.numel()}),
                     slot.grad});
    stepped.push_back(&slot);
  }
  const DType compute_dtype = stream_->compute_dtype();
  const bool fused_cast = compute_dtype != DType::F32;
  stream_->run(
      items,
      [&](const std::vector<OffloadStream::Piece>& pieces) {
        std::vector<Tensor> views;
        views.reserve(5 * pieces.size());  // no reallocation: the slots below point into it
        std::vector<ops::AdamWTensors> tensors;
        for (const OffloadStream::Piece& piece : pieces) {
          OptimizerSlot& slot = *stepped[piece.item];
          views.push_back(flat_range(slot.master, piece.begin, piece.length));
          views.push_back(Tensor::from_blob(const_cast<float*>(piece.grad), {piece.length}, DType::F32));
          views.push_back(flat_range(slot.exp_avg, piece.begin, piece.length));
          views.push_back(flat_range(slot.exp_avg_sq, piece.begin, piece.length));
          views.push_back(Tensor::from_blob(piece.staged, {piece.length}, compute_dtype));
          Tensor* v = &views[views.size() - 5];
          tensors.push_back(
              {v, v + 1, v + 2, v + 3, slot.weight_decay ? options_.weight_decay : 0.0, fused_cast ? v + 4 : nullptr});
        }
        ops::adamw_step_multi(tensors, lr, options_.beta1, options_.beta2, options_.eps, step_, grad_scale);
      },
      fused_cast ? OffloadStream::Staging::WrittenByWork : OffloadStream::Staging::CastAfterWork);
}

}  // namespace veomni
