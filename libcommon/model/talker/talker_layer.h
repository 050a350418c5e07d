// One talker decoder layer (transformers' Qwen3OmniMoeTalkerDecoderLayer), forward only: pre-norm attention with
// per-head q/k RMSNorm, then a sparse MoE block plus a shared SwiGLU expert gated by sigmoid(shared_expert_gate(x)).
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "model/attention.h"
#include "model/kv_cache.h"
#include "model/layer_inputs.h"
#include "model/layers/linear.h"
#include "model/layers/rmsnorm.h"
#include "model/moe.h"
#include "model/param.h"
#include "model/talker/talker_config.h"

namespace veomni {

class TalkerLayer {
 public:
  // Registers `{prefix}input_layernorm.weight`, `{prefix}self_attn.*`, `{prefix}post_attention_layernorm.weight`,
  // `{prefix}mlp.{gate.weight,experts.*}`, `{prefix}mlp.shared_expert.{gate,up,down}_proj.weight` and
  // `{prefix}mlp.shared_expert_gate.weight` [1, hidden].
  TalkerLayer(ParamStore& store, const TalkerConfig& config, const std::string& prefix);
  // h [T, hidden] -> [T, hidden].
  Tensor forward(const Tensor& h, const LayerInputs& in) const;
  // The same over this layer's KV caches (Attention::forward_cached): h [S, hidden] of one cached step.
  Tensor forward_cached(const Tensor& h, const CachedStep& step, Tensor& k_cache, Tensor& v_cache) const;

 private:
  Tensor shared_expert(const Tensor& x) const;
  // Everything after the attention: h1 is the attention output plus the residual.
  Tensor feed_forward(const Tensor& h1, const LayerInputs& in) const;

  RmsNorm input_norm_;
  Attention attention_;
  RmsNorm post_attention_norm_;
  MoeBlock moe_;
  Linear shared_gate_proj_, shared_up_proj_, shared_down_proj_, shared_expert_gate_;
};

}  // namespace veomni
