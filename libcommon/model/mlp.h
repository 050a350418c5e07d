// Dense SwiGLU MLP: down(silu(gate(x)) * up(x)).
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "kernels/decode_layer.h"
#include "model/layers/linear.h"
#include "model/layers/packed_linears.h"
#include "model/layers/rmsnorm.h"
#include "model/layers/shared_input_linears.h"
#include "model/param.h"

namespace veomni {

class Mlp {
 public:
  struct Saved {
    SharedInputLinears::Saved gate_up_proj;  // gate, then up
    Linear::Saved down_proj;
    Tensor gate, up;  // the projections' outputs, the SwiGLU inputs
    // The packed path instead: its projections' Saved and their packed output [N, 2I] (gate columns, then up).
    PackedLinears::Saved packed_proj;
    Tensor gate_up;
  };
  struct Output {
    Tensor out;
    Saved saved;
  };

  // Registers `{prefix}mlp.{gate,up,down}_proj.weight` (each followed by its LoRA adapter, if any) in the store's
  // current group. fp8: the projections' GEMMs in FP8 (model/layers/linear.h).
  Mlp(ParamStore& store, const std::string& prefix, int64_t hidden, int64_t intermediate, bool fp8 = false);

  // saved is empty unless save. A defined residual (the output's shape) is added by down_proj's GEMM. When gate and up
  // are frozen and their weights consecutive rows of one buffer (LoRA's base on a group of one rank), they run as one
  // GEMM into a packed [N, 2I] output that the packed SwiGLU reads (PackedLinears, ops::swiglu_fused_forward).
  Output forward(const Tensor& x, bool save, const Tensor& residual = Tensor()) const;
  Tensor backward(Saved&& saved, const Tensor& dy) const;

  // Decoding runs gate and up as one GEMM: fuse_gate_up() (once, after the weights are loaded) moves the two weights
  // into one [2I, hidden] tensor whose halves the parameters then view, so no memory is added and the parameters
  // keep their values; a weight with a LoRA adapter is left as it is.
  void fuse_gate_up();
  // Inference: residual += the MLP of norm(h), the add done by the down projection's GEMM. While the parameters still
  // view the fused weight, the norm, gate, up and SwiGLU run as one op (ops::rmsnorm_matmul_swiglu); else the norm,
  // then forward without saving.
  void add_forward_inference(const Tensor& h, const RmsNorm& norm, Tensor& residual) const;
  // The fused gate|up and the down weight for ops::dense_decode_layers; false (nothing set) unless the parameters
  // still view the fused weight and the down projection is plain.
  bool decode_weights(ops::DenseDecodeLayer& layer) const;

 private:
  bool gate_up_current() const;
  SharedInputLinears gate_up_proj() const { return {&gate_proj_, &up_proj_}; }

  Linear gate_proj_, up_proj_, down_proj_;
  Tensor gate_up_;  // [2I, hidden] after fuse_gate_up: gate rows, then up rows
};

}  // namespace veomni
