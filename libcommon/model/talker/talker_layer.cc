// Talker decoder layer forward: attention, then routed experts plus the gated shared expert.
#include "model/talker/talker_layer.h"

#include "kernels/ops.h"

namespace veomni {

TalkerLayer::TalkerLayer(ParamStore& store, const TalkerConfig& config, const std::string& prefix)
    : input_norm_(store.add(prefix + "input_layernorm.weight", {config.text.hidden_size}), config.text.rms_norm_eps),
      attention_(store, config.text, prefix),
      post_attention_norm_(store.add(prefix + "post_attention_layernorm.weight", {config.text.hidden_size}),
                           config.text.rms_norm_eps),
      moe_(store, config.text, prefix, nullptr),
      shared_gate_proj_(store, prefix + "mlp.shared_expert.gate_proj.weight",
                        {config.shared_expert_intermediate_size, config.text.hidden_size}),
      shared_up_proj_(store, prefix + "mlp.shared_expert.up_proj.weight",
                      {config.shared_expert_intermediate_size, config.text.hidden_size}),
      shared_down_proj_(store, prefix + "mlp.shared_expert.down_proj.weight",
                        {config.text.hidden_size, config.shared_expert_intermediate_size}),
      shared_expert_gate_(store, prefix + "mlp.shared_expert_gate.weight", {1, config.text.hidden_size}) {}

Tensor TalkerLayer::shared_expert(const Tensor& x) const {
  const Tensor gate = shared_gate_proj_.forward(x, false).out;
  const Tensor up = shared_up_proj_.forward(x, false).out;
  Tensor act = Tensor::empty(gate.shape(), gate.dtype(), gate.device());
  ops::swiglu_forward(gate, up, act);
  return shared_down_proj_.forward(act, false).out;
}

Tensor TalkerLayer::feed_forward(const Tensor& h1, const LayerInputs& in) const {
  const Tensor x = post_attention_norm_.forward(h1, false).out;
  Tensor out = moe_.forward(x, in, false, /*with_stats=*/false).out;
  ops::sigmoid_gated_add_(out, shared_expert_gate_.forward(x, false).out, shared_expert(x));
  ops::add_(out, h1);
  return out;
}

Tensor TalkerLayer::forward(const Tensor& h, const LayerInputs& in) const {
  Tensor h1 = attention_.forward(input_norm_.forward(h, false).out, in, false).out;
  ops::add_(h1, h);
  return feed_forward(h1, in);
}

Tensor TalkerLayer::forward_cached(const Tensor& h, const CachedStep& step, Tensor& k_cache, Tensor& v_cache) const {
  Tensor h1 = attention_.forward_cached(input_norm_.forward(h, false).out, step, k_cache, v_cache);
  ops::add_(h1, h);
  LayerInputs in;  // one process, every row real: the MoE needs no more
  in.real_rows = h1.dim(0);
  return feed_forward(h1, in);
}

}  // namespace veomni
