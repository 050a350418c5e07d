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
  // Registers `{prefix}mlp.{gate,up,down}_proj.weight` in the store's current group.
  Mlp(ParamStore& store, const std::string& prefix, int64_t hidden, int64_t intermediate);

  Tensor forward(const Tensor& x, bool save);
  Tensor backward(const Tensor& dy);
  void release();

 private:
  Linear gate_proj_, up_proj_, down_proj_;
  Tensor gate_, up_;
  Linear::Saved gate_proj_saved_, up_proj_saved_, down_proj_saved_;
};

}  // namespace veomni
