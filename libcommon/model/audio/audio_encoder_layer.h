// One audio encoder layer: pre-LayerNorm windowed self-attention with biases, then pre-LayerNorm fc1-GELU-fc2.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/ops.h"
#include "model/audio/audio_encoder_config.h"
#include "model/param.h"
#include "model/layers/biased_linear.h"
#include "model/layers/layer_norm.h"

namespace veomni {

class AudioEncoderLayer {
 public:
  struct Saved {
    LayerNorm::Saved attn_norm, final_norm;
    BiasedLinear::Saved k_proj, v_proj, q_proj, out_proj, fc1, fc2;
    Tensor q, k, v, attn_out, lse;  // the attention core's
    Tensor fc1_out;                 // the GELU input
  };
  struct Output {
    Tensor out;
    Saved saved;
  };

  // Registers `{prefix}layers.{index}.*` in the store's current group.
  AudioEncoderLayer(ParamStore& store, const AudioEncoderConfig& config, int64_t index);

  // h [S, d_model] -> [S, d_model]; attention stays inside each window of cu_seqlens (non-causal). saved is empty
  // unless save.
  Output forward(const Tensor& h, const std::vector<int32_t>& cu_seqlens, bool save) const;
  // Returns dh and accumulates the parameter gradients.
  Tensor backward(Saved&& saved, const Tensor& dh, const std::vector<int32_t>& cu_seqlens) const;

 private:
  // The attention part of forward and backward, filling and consuming the attention fields of a Saved.
  Tensor attention_forward(const Tensor& x, const std::vector<int32_t>& cu_seqlens, bool save, Saved& saved) const;
  Tensor attention_backward(Saved& saved, const Tensor& dy, const std::vector<int32_t>& cu_seqlens) const;

  int64_t num_heads_;
  int64_t head_dim_;
  float scale_;
  ops::GeluKind activation_;
  // Declared (so registered) in transformers' module order: listings read like its state_dict.
  BiasedLinear k_proj_, v_proj_, q_proj_, out_proj_;
  LayerNorm attn_norm_;
  BiasedLinear fc1_, fc2_;
  LayerNorm final_norm_;
};

}  // namespace veomni
