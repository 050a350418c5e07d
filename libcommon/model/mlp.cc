// Dense SwiGLU MLP forward and backward.
#include "model/mlp.h"

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

Mlp::Mlp(ParamStore& store, const std::string& prefix, int64_t hidden, int64_t intermediate)
    : gate_proj_(store, prefix + "mlp.gate_proj.weight", {intermediate, hidden}),
      up_proj_(store, prefix + "mlp.up_proj.weight", {intermediate, hidden}),
      down_proj_(store, prefix + "mlp.down_proj.weight", {hidden, intermediate}) {}

Mlp::Output Mlp::forward(const Tensor& x, bool save) const {
  Output result;
  Saved& saved = result.saved;
  Tensor gate = take_out(gate_proj_.forward(x, save), saved.gate_proj);
  Tensor up = take_out(up_proj_.forward(x, save), saved.up_proj);
  Tensor act = empty_like(gate, gate.shape());
  ops::swiglu_forward(gate, up, act);
  if (save) {
    saved.gate = gate;
    saved.up = up;
  }
  result.out = take_out(down_proj_.forward(act, save), saved.down_proj);
  return result;
}

Tensor Mlp::backward(Saved&& saved, const Tensor& dy) const {
  Saved kept = std::move(saved);
  VEOMNI_CHECK(kept.gate.defined(), "MLP backward without a saved forward");
  Tensor dact = down_proj_.backward(std::move(kept.down_proj), dy);
  Tensor dgate = empty_like(kept.gate, kept.gate.shape());
  Tensor dup = empty_like(kept.up, kept.up.shape());
  ops::swiglu_backward(dact, kept.gate, kept.up, dgate, dup);
  kept.gate = kept.up = Tensor();
  Tensor dx = gate_proj_.backward(std::move(kept.gate_proj), dgate);
  up_proj_.backward_accumulate(std::move(kept.up_proj), dup, dx);
  return dx;
}

}  // namespace veomni
