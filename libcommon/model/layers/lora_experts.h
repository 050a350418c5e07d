// LoRA on an MoE layer's stacked expert weights W [E, out, in]: per expert W_e + scale * B_e A_e (independent), or
// one pair shared by the layer's experts (share_expert_lora), over the rows routed to this rank's experts.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "model/layers/lora_adapter.h"
#include "model/param.h"

namespace veomni {

class ExpertLora {
 public:
  ExpertLora() = default;

  // When the store's LoRA settings target `weight` (an expert tensor [E, out, in] just registered), registers
  // `<name>.lora_A.weight` and `<name>.lora_B.weight` right after it and returns the adapter; else none.
  // Independent: A [E, r, in], B [E, out, r], expert parameters holding the same expert rows as `weight`;
  // shared: A [r, in], B [out, r], plain parameters; r is LoraConfig::rank_of the tensor (2 x rank for a fused
  // gate_up_proj selected through gate_proj and up_proj, as PEFT does).
  static ExpertLora attach(ParamStore& store, const Parameter& weight);

  bool exists() const { return a_ != nullptr; }
  bool active() const { return a_ != nullptr && registry_->applied(); }
  bool shared() const { return shared_; }

  // x [T, in]: rows grouped by local expert (counts). y [T, out] += scale * B_e (A_e x_t) per row of expert e when
  // active. Returns x A^T [T, r] (per row its expert's A) when active and save, else undefined.
  Tensor forward(const Tensor& x, const std::vector<int64_t>& counts, Tensor& y, bool save) const;
  // For a forward that returned xa: dx += scale * (dy B) A and the adapter's gradients, per expert.
  void backward(const Tensor& x, Tensor xa, const Tensor& dy, const std::vector<int64_t>& counts, Tensor& dx) const;

 private:
  const LoraRegistry* registry_ = nullptr;
  float scale_ = 0;  // LoraConfig::scale_of the expert tensor (a fused gate_up_proj may take rank 2r)
  Parameter* a_ = nullptr;
  Parameter* b_ = nullptr;
  bool shared_ = false;
};

}  // namespace veomni
