// Dense SwiGLU MLP: down(silu(gate(x)) * up(x)).
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "model/layers/linear.h"
#include "model/param.h"

namespace veomni {

class Mlp {
 public:
  struct Saved {
    Linear::Saved gate_proj, up_proj, down_proj;
    Tensor gate, up;  // the projections' outputs, the SwiGLU inputs
  };
  struct Output {
    Tensor out;
    Saved saved;
  };

  // Registers `{prefix}mlp.{gate,up,down}_proj.weight` (each followed by its LoRA adapter, if any) in the store's
  // current group.
  Mlp(ParamStore& store, const std::string& prefix, int64_t hidden, int64_t intermediate);

  // saved is empty unless save.
  Output forward(const Tensor& x, bool save) const;
  Tensor backward(Saved&& saved, const Tensor& dy) const;

 private:
  Linear gate_proj_, up_proj_, down_proj_;
};

}  // namespace veomni
