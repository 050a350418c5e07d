// Dense SwiGLU MLP forward and backward.
#include "model/mlp.h"

#include "kernels/decode_ops.h"
#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

Mlp::Mlp(ParamStore& store, const std::string& prefix, int64_t hidden, int64_t intermediate, bool fp8)
    : gate_proj_(store, prefix + "mlp.gate_proj.weight", {intermediate, hidden}, fp8),
      up_proj_(store, prefix + "mlp.up_proj.weight", {intermediate, hidden}, fp8),
      down_proj_(store, prefix + "mlp.down_proj.weight", {hidden, intermediate}, fp8) {}

void Mlp::fuse_gate_up() {
  Parameter& gate = gate_proj_.weight();
  Parameter& up = up_proj_.weight();
  if (gate_up_current() || !gate.value.defined() || !up.value.defined()) return;
  if (gate_proj_.adapter().exists() || up_proj_.adapter().exists() || gate.value.dtype() != up.value.dtype()) return;
  const int64_t rows = gate.value.dim(0);
  Tensor fused = Tensor::empty({2 * rows, gate.value.dim(1)}, gate.value.dtype(), gate.value.device());
  fused.slice(0, rows).copy_from(gate.value);
  fused.slice(rows, 2 * rows).copy_from(up.value);
  gate.value = fused.slice(0, rows);
  up.value = fused.slice(rows, 2 * rows);
  gate_up_ = fused;
}

// The parameters still view the fused tensor (nothing replaced their values since fuse_gate_up).
bool Mlp::gate_up_current() const {
  if (!gate_up_.defined()) return false;
  const Tensor& gate = gate_proj_.weight().value;
  const Tensor& up = up_proj_.weight().value;
  const char* base = static_cast<const char*>(gate_up_.raw_data());
  return gate.defined() && up.defined() && gate.raw_data() == base && up.raw_data() == base + gate_up_.nbytes() / 2;
}

void Mlp::add_forward_inference(const Tensor& h, const RmsNorm& norm, Tensor& residual) const {
  if (!gate_up_current()) return ops::add_(residual, forward(norm.forward(h, false).out, false).out);
  Tensor act = empty_like(h, {h.dim(0), gate_up_.dim(0) / 2});
  ops::rmsnorm_matmul_swiglu(h, norm.weight_value(), norm.eps(), gate_up_, act);
  down_proj_.forward_accumulate(act, residual);
}

bool Mlp::decode_weights(ops::DenseDecodeLayer& layer) const {
  if (!gate_up_current() || !down_proj_.plain()) return false;
  layer.gate_up = gate_up_;
  layer.down = down_proj_.weight().value;
  return true;
}

Mlp::Output Mlp::forward(const Tensor& x, bool save, const Tensor& residual) const {
  Output result;
  Saved& saved = result.saved;
  Tensor act;
  const Tensor packed = PackedLinears::joined_weight({&gate_proj_, &up_proj_}, x);
  if (packed.defined()) {
    const PackedLinears gate_up_proj(packed, {&gate_proj_, &up_proj_});
    const Tensor gate_up = take_out(gate_up_proj.forward(x, save), saved.packed_proj);
    act = empty_like(gate_up, {gate_up.dim(0), gate_up.dim(1) / 2});
    ops::swiglu_fused_forward(gate_up, act);
    if (save) saved.gate_up = gate_up;
  } else {
    const std::vector<Tensor> gate_up = take_out(gate_up_proj().forward(x, save), saved.gate_up_proj);
    const Tensor& gate = gate_up[0];
    const Tensor& up = gate_up[1];
    act = empty_like(gate, gate.shape());
    ops::swiglu_forward(gate, up, act);
    if (save) {
      saved.gate = gate;
      saved.up = up;
    }
  }
  result.out = take_out(down_proj_.forward(act, save, residual), saved.down_proj);
  return result;
}

Tensor Mlp::backward(Saved&& saved, const Tensor& dy) const {
  Saved kept = std::move(saved);
  VEOMNI_CHECK(kept.gate.defined() || kept.gate_up.defined(), "MLP backward without a saved forward");
  Tensor dact = down_proj_.backward(std::move(kept.down_proj), dy);
  if (kept.gate_up.defined()) {
    Tensor dgate_up = empty_like(kept.gate_up, kept.gate_up.shape());
    ops::swiglu_fused_backward(dact, kept.gate_up, dgate_up);
    kept.gate_up = Tensor();
    const Tensor weight = Tensor::join_rows({gate_proj_.weight().value, up_proj_.weight().value});
    VEOMNI_CHECK(weight.defined(), "MLP backward: the forward packed gate and up, but their weights are apart now");
    return PackedLinears(weight, {&gate_proj_, &up_proj_}).backward(std::move(kept.packed_proj), dgate_up);
  }
  Tensor dgate = empty_like(kept.gate, kept.gate.shape());
  Tensor dup = empty_like(kept.up, kept.up.shape());
  ops::swiglu_backward(dact, kept.gate, kept.up, dgate, dup);
  kept.gate = kept.up = Tensor();
  return gate_up_proj().backward(std::move(kept.gate_up_proj), {dgate, dup});
}

}  // namespace veomni
