// Dense SwiGLU MLP forward and backward.
#include "model/mlp.h"

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

Mlp::Mlp(ParamStore& store, const std::string& prefix, int64_t hidden, int64_t intermediate)
    : gate_proj_(store.add(prefix + "mlp.gate_proj.weight", {intermediate, hidden})),
      up_proj_(store.add(prefix + "mlp.up_proj.weight", {intermediate, hidden})),
      down_proj_(store.add(prefix + "mlp.down_proj.weight", {hidden, intermediate})) {}

Tensor Mlp::forward(const Tensor& x, bool save) {
  Tensor gate = take_out(gate_proj_.forward(x, save), gate_proj_saved_);
  Tensor up = take_out(up_proj_.forward(x, save), up_proj_saved_);
  Tensor act = empty_like(gate, gate.shape());
  ops::swiglu_forward(gate, up, act);
  if (save) {
    gate_ = gate;
    up_ = up;
  }
  return take_out(down_proj_.forward(act, save), down_proj_saved_);
}

Tensor Mlp::backward(const Tensor& dy) {
  VEOMNI_CHECK(gate_.defined(), "MLP backward without a saved forward");
  Tensor dact = down_proj_.backward(std::move(down_proj_saved_), dy);
  Tensor dgate = empty_like(gate_, gate_.shape());
  Tensor dup = empty_like(up_, up_.shape());
  ops::swiglu_backward(dact, gate_, up_, dgate, dup);
  gate_ = up_ = Tensor();
  Tensor dx = gate_proj_.backward(std::move(gate_proj_saved_), dgate);
  up_proj_.backward_accumulate(std::move(up_proj_saved_), dup, dx);
  return dx;
}

void Mlp::release() {
  gate_ = up_ = Tensor();
  gate_proj_saved_ = up_proj_saved_ = down_proj_saved_ = {};
}

}  // namespace veomni
