// Qwen3 self-attention: q/k/v projections, per-head q/k RMSNorm, RoPE, packed causal GQA attention, o_proj.
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "kernels/decode_layer.h"
#include "model/kv_cache.h"
#include "model/layer_inputs.h"
#include "model/layers/linear.h"
#include "model/layers/packed_linears.h"
#include "model/layers/rmsnorm.h"
#include "model/layers/shared_input_linears.h"
#include "model/model_config.h"
#include "model/param.h"

namespace veomni {

// [S, H, D] -> [S, H*rep, D]: every head repeated rep times consecutively (transformers' repeat_kv).
Tensor repeat_heads(const Tensor& x, int64_t rep);
// The adjoint of repeat_heads: [S, H*rep, D] -> [S, H, D], summing each head's rep copies.
Tensor fold_repeated_heads(const Tensor& x, int64_t rep);

class Attention {
 public:
  // What backward reads: the sub-layers' Saved and the attention core's tensors in the attention (head-sharded
  // under sequence parallelism) layout.
  struct Saved {
    SharedInputLinears::Saved qkv_proj;  // q, k, v in that order
    Linear::Saved o_proj;
    RmsNorm::Saved q_norm, k_norm;
    Tensor q, k, v, out, lse;
    // The packed path instead of qkv_proj, q_norm and k_norm: its projections' Saved, their packed output and the
    // q/k norms' rstd.
    PackedLinears::Saved packed_proj;
    Tensor qkv, q_rstd, k_rstd;
  };
  struct Output {
    Tensor out;
    Saved saved;
  };

  // Registers `{prefix}self_attn.*` (and the projections' LoRA adapters) in the store's current group. fp8: the
  // projections' GEMMs in FP8 (model/layers/linear.h).
  Attention(ParamStore& store, const ModelConfig& config, const std::string& prefix, bool fp8 = false);

  // x [S_local, hidden] (already normalised) -> [S_local, hidden]; saved is empty unless save. A defined residual
  // [S_local, hidden] is added by the output projection's GEMM (Linear::forward). When q, k, v and their norms are
  // frozen and the three weights are consecutive rows of one buffer (LoRA's base on a group of one rank: FSDP pools a
  // group's frozen shards), q/k/v run as one GEMM and the norms with RoPE as one op on its packed output
  // (PackedLinears, ops::qkv_norm_rope_forward); the same values, up to the summation order and fewer roundings.
  Output forward(const Tensor& x, const LayerInputs& in, bool save, const Tensor& residual = Tensor()) const;
  // Returns dx and accumulates the parameter gradients.
  Tensor backward(Saved&& saved, const Tensor& dy, const LayerInputs& in) const;
  // Inference (no parallel seams, nothing saved): x [S, hidden] of a cached step -> [S, hidden]. Writes the step's
  // rotated keys and its values into the layer's caches k_cache, v_cache [B, capacity, kv_heads, head_dim] at the
  // step's rows, then attends as the step's kind says (model/kv_cache.h).
  Tensor forward_cached(const Tensor& x, const CachedStep& step, Tensor& k_cache, Tensor& v_cache) const;
  // The same for the layer's input h before its norm, added into residual [S, hidden] by the output projection's
  // GEMM (decoding's residual add). The norm runs inside the q/k/v GEMM while the projections are fused
  // (ops::rmsnorm_matmul), else on its own.
  void add_forward_cached(const Tensor& h, const RmsNorm& input_norm, const CachedStep& step, Tensor& k_cache,
                          Tensor& v_cache, Tensor& residual) const;
  // Decoding runs q, k and v as one GEMM: fuse_qkv() (once, after the weights are loaded) moves the three weights
  // into one [(Hq + 2 Hkv) D, hidden] tensor that the parameters then view (same values, no extra memory); projections
  // with LoRA adapters or of different dtypes stay apart. The training path is unchanged.
  void fuse_qkv();
  // The fused q/k/v weight, the q/k norms, the head layout and o_proj for ops::dense_decode_layers; false (nothing
  // set) unless the parameters still view the fused weight and o_proj is plain.
  bool decode_weights(ops::DenseDecodeLayer& layer) const;

 private:
  SharedInputLinears qkv_proj() const;
  // The joined q/k/v weight when the packed path applies to x (see forward), else undefined.
  Tensor packed_qkv_weight(const Tensor& x) const;
  // forward's q/k/v [S, heads, D] (normalised and rotated), through the packed path or the projections one by one.
  void project_packed(const Tensor& x, const Tensor& weight, const LayerInputs& in, bool save, Tensor& q, Tensor& k,
                      Tensor& v, Saved& saved) const;
  void project(const Tensor& x, const LayerInputs& in, bool save, Tensor& q, Tensor& k, Tensor& v, Saved& saved) const;
  // forward_cached up to the output projection: the attention's output [S, Hq * D]. With input_norm, x is the input
  // before that norm.
  Tensor attend_cached(const Tensor& x, const RmsNorm* input_norm, const CachedStep& step, Tensor& k_cache,
                       Tensor& v_cache) const;
  bool qkv_current() const;
  Tensor to_heads(const Tensor& x, const LayerInputs& in) const;
  Tensor to_seq(const Tensor& x, const LayerInputs& in) const;
  int64_t kv_repeats(const LayerInputs& in) const;

  int64_t num_heads_;
  int64_t num_kv_heads_;
  int64_t head_dim_;
  float scale_;
  Linear q_proj_, k_proj_, v_proj_, o_proj_;
  RmsNorm q_norm_, k_norm_;
  Tensor qkv_;  // after fuse_qkv: q rows, then k rows, then v rows
};

}  // namespace veomni
