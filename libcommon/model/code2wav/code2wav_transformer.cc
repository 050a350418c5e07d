// Forward pass of code2wav's pre-transformer over the op API.
#include "model/code2wav/code2wav_transformer.h"

#include <cmath>

#include "kernels/ops.h"

namespace veomni {

Code2WavTransformerLayer::Code2WavTransformerLayer(ParamStore& store, const Code2WavConfig& config,
                                                   const std::string& prefix)
    : heads_(config.num_attention_heads),
      kv_heads_(config.num_key_value_heads),
      head_dim_(config.head_dim()),
      window_(config.sliding_window),
      input_norm_(store.add(prefix + "input_layernorm.weight", {config.hidden_size}), config.rms_norm_eps),
      post_attention_norm_(store.add(prefix + "post_attention_layernorm.weight", {config.hidden_size}),
                           config.rms_norm_eps),
      q_proj_(store, prefix + "self_attn.q_proj.weight", {heads_ * head_dim_, config.hidden_size}),
      k_proj_(store, prefix + "self_attn.k_proj.weight", {kv_heads_ * head_dim_, config.hidden_size}),
      v_proj_(store, prefix + "self_attn.v_proj.weight", {kv_heads_ * head_dim_, config.hidden_size}),
      o_proj_(store, prefix + "self_attn.o_proj.weight", {config.hidden_size, heads_ * head_dim_}),
      mlp_(store, prefix, config.hidden_size, config.intermediate_size),
      attn_scale_(store.add(prefix + "self_attn_layer_scale.scale", {config.hidden_size})),
      mlp_scale_(store.add(prefix + "mlp_layer_scale.scale", {config.hidden_size})) {}

Tensor Code2WavTransformerLayer::attention(const Tensor& x, const Tensor& cos, const Tensor& sin) const {
  const int64_t t = x.dim(0);
  Tensor q = q_proj_.forward(x, false).out.view({t, heads_, head_dim_});
  Tensor k = k_proj_.forward(x, false).out.view({t, kv_heads_, head_dim_});
  Tensor v = v_proj_.forward(x, false).out.view({t, kv_heads_, head_dim_});
  ops::rope_apply(q, cos, sin, false);
  ops::rope_apply(k, cos, sin, false);
  Tensor out = Tensor::empty(q.shape(), q.dtype(), q.device());
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim_)));
  ops::sliding_window_attention_forward(q, k, v, window_, scale, out);
  return o_proj_.forward(out.view({t, heads_ * head_dim_}), false).out;
}

Tensor Code2WavTransformerLayer::forward(const Tensor& h, const Tensor& cos, const Tensor& sin) const {
  Tensor attn = attention(input_norm_.forward(h, false).out, cos, sin);
  ops::scale_columns_(attn, attn_scale_->value);
  ops::add_(attn, h);
  Tensor out = mlp_.forward(post_attention_norm_.forward(attn, false).out, false).out;
  ops::scale_columns_(out, mlp_scale_->value);
  ops::add_(out, attn);
  return out;
}

Code2WavTransformer::Code2WavTransformer(ParamStore& store, const Code2WavConfig& config, const std::string& prefix)
    : config_(config), norm_(nullptr, config.rms_norm_eps) {
  for (int64_t i = 0; i < config.num_hidden_layers; ++i)
    layers_.emplace_back(store, config, prefix + "layers." + std::to_string(i) + ".");
  norm_ = RmsNorm(store.add(prefix + "norm.weight", {config.hidden_size}), config.rms_norm_eps);
}

Tensor Code2WavTransformer::forward(const Tensor& embeddings) const {
  const int64_t t = embeddings.dim(0);
  std::vector<int64_t> positions(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) positions[static_cast<size_t>(i)] = i;
  const Device device = embeddings.device();
  Tensor cos = Tensor::empty({t, config_.head_dim()}, DType::F32, device);
  Tensor sin = Tensor::empty({t, config_.head_dim()}, DType::F32, device);
  ops::rope_tables(Tensor::from_vector(positions, {t}).to(device), config_.head_dim(), config_.rope_theta, {}, cos,
                   sin);
  Tensor h = embeddings;
  for (const Code2WavTransformerLayer& layer : layers_) h = layer.forward(h, cos, sin);
  return norm_.forward(h, false).out;
}

}  // namespace veomni
