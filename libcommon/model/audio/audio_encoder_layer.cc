// Audio encoder layer forward and backward through the op API.
#include "model/audio/audio_encoder_layer.h"

#include <cmath>

#include "model/layers/common.h"

namespace veomni {

namespace {

// Registers `{name}.weight` [out, in], its LoRA adapter when targeted, and `{name}.bias` [out].
BiasedLinear biased_linear(ParamStore& store, const std::string& name, int64_t out, int64_t in) {
  return BiasedLinear(store, name, out, in);
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

Tensor AudioEncoderLayer::attention_forward(const Tensor& x, const std::vector<int32_t>& cu_seqlens, bool save,
                                            Saved& saved) const {
  const int64_t s = x.dim(0);
  const Tensor q = take_out(q_proj_.forward(x, save), saved.q_proj).view({s, num_heads_, head_dim_});
  const Tensor k = take_out(k_proj_.forward(x, save), saved.k_proj).view({s, num_heads_, head_dim_});
  const Tensor v = take_out(v_proj_.forward(x, save), saved.v_proj).view({s, num_heads_, head_dim_});
  Tensor out = empty_like(q, q.shape());
  Tensor lse = Tensor::empty({num_heads_, s}, DType::F32, q.device());
  ops::attention_forward(q, k, v, cu_seqlens, false, scale_, out, lse);
  if (save) {
    saved.q = q;
    saved.k = k;
    saved.v = v;
    saved.attn_out = out;
    saved.lse = lse;
  }
  return take_out(out_proj_.forward(out.view({s, num_heads_ * head_dim_}), save), saved.out_proj);
}

Tensor AudioEncoderLayer::attention_backward(Saved& saved, const Tensor& dy,
                                             const std::vector<int32_t>& cu_seqlens) const {
  VEOMNI_CHECK(saved.q.defined(), "audio attention backward without a saved forward");
  const int64_t s = dy.dim(0), width = num_heads_ * head_dim_;
  const Tensor dout = out_proj_.backward(std::move(saved.out_proj), dy).view({s, num_heads_, head_dim_});
  Tensor dq = empty_like(saved.q, saved.q.shape());
  Tensor dk = empty_like(saved.k, saved.k.shape());
  Tensor dv = empty_like(saved.v, saved.v.shape());
  ops::attention_backward(dout, saved.q, saved.k, saved.v, saved.attn_out, saved.lse, cu_seqlens, false, scale_, dq,
                          dk, dv);
  saved.q = saved.k = saved.v = saved.attn_out = saved.lse = Tensor();
  Tensor dx = q_proj_.backward(std::move(saved.q_proj), dq.view({s, width}));
  k_proj_.backward_accumulate(std::move(saved.k_proj), dk.view({s, width}), dx);
  v_proj_.backward_accumulate(std::move(saved.v_proj), dv.view({s, width}), dx);
  return dx;
}

AudioEncoderLayer::Output AudioEncoderLayer::forward(const Tensor& h, const std::vector<int32_t>& cu_seqlens,
                                                     bool save) const {
  Output result;
  Saved& saved = result.saved;
  Tensor mid = attention_forward(take_out(attn_norm_.forward(h, save), saved.attn_norm), cu_seqlens, save, saved);
  ops::add_(mid, h);
  const Tensor normed = take_out(final_norm_.forward(mid, save), saved.final_norm);
  const Tensor fc1_out = take_out(fc1_.forward(normed, save), saved.fc1);
  Tensor act = empty_like(fc1_out, fc1_out.shape());
  ops::gelu_forward(fc1_out, activation_, act);
  Tensor out = take_out(fc2_.forward(act, save), saved.fc2);
  ops::add_(out, mid);
  if (save) saved.fc1_out = fc1_out;
  result.out = out;
  return result;
}

Tensor AudioEncoderLayer::backward(Saved&& saved, const Tensor& dh, const std::vector<int32_t>& cu_seqlens) const {
  Saved kept = std::move(saved);
  VEOMNI_CHECK(kept.fc1_out.defined(), "audio encoder layer backward without a saved forward");
  const Tensor dact = fc2_.backward(std::move(kept.fc2), dh);
  Tensor dfc1 = empty_like(dact, dact.shape());
  ops::gelu_backward(dact, kept.fc1_out, activation_, dfc1);
  kept.fc1_out = Tensor();
  Tensor dmid = final_norm_.backward(std::move(kept.final_norm), fc1_.backward(std::move(kept.fc1), dfc1));
  ops::add_(dmid, dh);
  Tensor dx = attn_norm_.backward(std::move(kept.attn_norm), attention_backward(kept, dmid, cu_seqlens));
  ops::add_(dx, dmid);
  return dx;
}

}  // namespace veomni
