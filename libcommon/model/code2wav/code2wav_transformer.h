// Code2wav's pre-transformer (transformers' Qwen3OmniMoeCode2WavTransformerModel), forward only: decoder layers
// of sliding-window causal attention (no q/k norm) and a SwiGLU MLP, each branch scaled by a learnt layer scale.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/code2wav/code2wav_config.h"
#include "model/layers/linear.h"
#include "model/layers/rmsnorm.h"
#include "model/mlp.h"
#include "model/param.h"

namespace veomni {

class Code2WavTransformerLayer {
 public:
  // Registers `{prefix}self_attn.{q,k,v,o}_proj.weight`, the two norms, `{prefix}mlp.*` and the layer scales.
  Code2WavTransformerLayer(ParamStore& store, const Code2WavConfig& config, const std::string& prefix);
  // h [T, hidden]; cos/sin [T, head_dim].
  Tensor forward(const Tensor& h, const Tensor& cos, const Tensor& sin) const;

 private:
  Tensor attention(const Tensor& x, const Tensor& cos, const Tensor& sin) const;

  int64_t heads_, kv_heads_, head_dim_, window_;
  RmsNorm input_norm_, post_attention_norm_;
  Linear q_proj_, k_proj_, v_proj_, o_proj_;
  Mlp mlp_;
  Parameter* attn_scale_;
  Parameter* mlp_scale_;
};

class Code2WavTransformer {
 public:
  // Registers `{prefix}layers.{i}.*` and `{prefix}norm.weight`.
  Code2WavTransformer(ParamStore& store, const Code2WavConfig& config, const std::string& prefix);
  // embeddings [T, hidden] at positions 0..T-1 -> the final-normed hidden states [T, hidden].
  Tensor forward(const Tensor& embeddings) const;

 private:
  Code2WavConfig config_;
  std::vector<Code2WavTransformerLayer> layers_;
  RmsNorm norm_;
};

}  // namespace veomni
