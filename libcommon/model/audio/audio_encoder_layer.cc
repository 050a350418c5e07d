// Audio encoder layer forward and backward through the op API.
#include "model/audio/audio_encoder_layer.h"

#include <cmath>

#include "model/layers/common.h"

namespace veomni {

namespace {

// Registers `{name}.weight` [out, in] and `{name}.bias` [out].
BiasedLinear biased_linear(ParamStore& store, const std::string& name, int64_t out, int64_t in) {
  Parameter* weight = store.add(name + ".weight", {out, in});
  return BiasedLinear(weight, store.add(name + ".bias", {out}));
}

LayerNorm layer_norm(ParamStore& store, const std::string& name, int64_t width, double eps) {
  Parameter* weight = store.add(name + ".weight", {width});
  return LayerNorm(weight, store.add(name + ".bias", {width}), eps);
}

std::string layer_name(const AudioEncoderConfig& config, int64_t index, const char* module) {
  return config.param_prefix + "layers." + std::to_string(index) + "." + module;
}

}  // namespace

AudioEncoderLayer::AudioEncoderLayer(ParamStore& store, const AudioEncoderConfig& config, int64_t index)
    : num_heads_(config.encoder_attention_heads),
      head_dim_(config.head_dim()),
      scale_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(config.head_dim())))),
      activation_(config.tanh_gelu() ? ops::GeluKind::Tanh : ops::GeluKind::Erf),
      k_proj_(biased_linear(store, layer_name(config, index, "self_attn.k_proj"), config.d_model, config.d_model)),
      v_proj_(biased_linear(store, layer_name(config, index, "self_attn.v_proj"), config.d_model, config.d_model)),
      q_proj_(biased_linear(store, layer_name(config, index, "self_attn.q_proj"), config.d_model, config.d_model)),
      out_proj_(biased_linear(store, layer_name(config, index, "self_attn.out_proj"), config.d_model, config.d_model)),
      attn_norm_(layer_norm(store, layer_name(config, index, "self_attn_layer_norm"), config.d_model,
                            config.layer_norm_eps)),
      fc1_(biased_linear(store, layer_name(config, index, "fc1"), config.encoder_ffn_dim, config.d_model)),
      fc2_(biased_linear(store, layer_name(config, index, "fc2"), config.d_model, config.encoder_ffn_dim)),
      final_norm_(layer_norm(store, layer_name(config, index, "final_layer_norm"), config.d_model,
                             config.layer_norm_eps)) {}

Tensor AudioEncoderLayer::attention_forward(const Tensor& x, const std::vector<int32_t>& cu_seqlens, bool save) {
  const int64_t s = x.dim(0);
  const Tensor q = take_out(q_proj_.forward(x, save), q_proj_saved_).view({s, num_heads_, head_dim_});
  const Tensor k = take_out(k_proj_.forward(x, save), k_proj_saved_).view({s, num_heads_, head_dim_});
  const Tensor v = take_out(v_proj_.forward(x, save), v_proj_saved_).view({s, num_heads_, head_dim_});
  Tensor out = empty_like(q, q.shape());
  Tensor lse = Tensor::empty({num_heads_, s}, DType::F32, q.device());
  ops::attention_forward(q, k, v, cu_seqlens, false, scale_, out, lse);
  if (save) {
    q_ = q;
    k_ = k;
    v_ = v;
    attn_out_ = out;
    lse_ = lse;
  }
  return take_out(out_proj_.forward(out.view({s, num_heads_ * head_dim_}), save), out_proj_saved_);
}

Tensor AudioEncoderLayer::attention_backward(const Tensor& dy, const std::vector<int32_t>& cu_seqlens) {
  VEOMNI_CHECK(q_.defined(), "audio attention backward without a saved forward");
  const int64_t s = dy.dim(0), width = num_heads_ * head_dim_;
  const Tensor dout = out_proj_.backward(std::move(out_proj_saved_), dy).view({s, num_heads_, head_dim_});
  Tensor dq = empty_like(q_, q_.shape());
  Tensor dk = empty_like(k_, k_.shape());
  Tensor dv = empty_like(v_, v_.shape());
  ops::attention_backward(dout, q_, k_, v_, attn_out_, lse_, cu_seqlens, false, scale_, dq, dk, dv);
  q_ = k_ = v_ = attn_out_ = lse_ = Tensor();
  Tensor dx = q_proj_.backward(std::move(q_proj_saved_), dq.view({s, width}));
  k_proj_.backward_accumulate(std::move(k_proj_saved_), dk.view({s, width}), dx);
  v_proj_.backward_accumulate(std::move(v_proj_saved_), dv.view({s, width}), dx);
  return dx;
}

Tensor AudioEncoderLayer::forward(const Tensor& h, const std::vector<int32_t>& cu_seqlens, bool save) {
  Tensor mid = attention_forward(take_out(attn_norm_.forward(h, save), attn_norm_saved_), cu_seqlens, save);
  ops::add_(mid, h);
  const Tensor normed = take_out(final_norm_.forward(mid, save), final_norm_saved_);
  const Tensor fc1_out = take_out(fc1_.forward(normed, save), fc1_saved_);
  Tensor act = empty_like(fc1_out, fc1_out.shape());
  ops::gelu_forward(fc1_out, activation_, act);
  Tensor out = take_out(fc2_.forward(act, save), fc2_saved_);
  ops::add_(out, mid);
  if (save) fc1_out_ = fc1_out;
  return out;
}

Tensor AudioEncoderLayer::backward(const Tensor& dh, const std::vector<int32_t>& cu_seqlens) {
  VEOMNI_CHECK(fc1_out_.defined(), "audio encoder layer backward without a saved forward");
  const Tensor dact = fc2_.backward(std::move(fc2_saved_), dh);
  Tensor dfc1 = empty_like(dact, dact.shape());
  ops::gelu_backward(dact, fc1_out_, activation_, dfc1);
  fc1_out_ = Tensor();
  Tensor dmid = final_norm_.backward(std::move(final_norm_saved_), fc1_.backward(std::move(fc1_saved_), dfc1));
  ops::add_(dmid, dh);
  Tensor dx = attn_norm_.backward(std::move(attn_norm_saved_), attention_backward(dmid, cu_seqlens));
  ops::add_(dx, dmid);
  return dx;
}

void AudioEncoderLayer::release() {
  q_ = k_ = v_ = attn_out_ = lse_ = fc1_out_ = Tensor();
  attn_norm_saved_ = final_norm_saved_ = {};
  k_proj_saved_ = v_proj_saved_ = q_proj_saved_ = out_proj_saved_ = fc1_saved_ = fc2_saved_ = {};
}

}  // namespace veomni
