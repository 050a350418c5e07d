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
  // Registers `{prefix}layers.{index}.*` in the store's current group.
  AudioEncoderLayer(ParamStore& store, const AudioEncoderConfig& config, int64_t index);

  // h [S, d_model] -> [S, d_model]; attention stays inside each window of cu_seqlens (non-causal).
  Tensor forward(const Tensor& h, const std::vector<int32_t>& cu_seqlens, bool save);
  // Returns dh and accumulates the parameter gradients.
  Tensor backward(const Tensor& dh, const std::vector<int32_t>& cu_seqlens);
  void release();

 private:
  Tensor attention_forward(const Tensor& x, const std::vector<int32_t>& cu_seqlens, bool save);
  Tensor attention_backward(const Tensor& dy, const std::vector<int32_t>& cu_seqlens);

  int64_t num_heads_;
  int64_t head_dim_;
  float scale_;
  ops::GeluKind activation_;
  // Declared (so registered) in transformers' module order: listings read like its state_dict.
  BiasedLinear k_proj_, v_proj_, q_proj_, out_proj_;
  LayerNorm attn_norm_;
  BiasedLinear fc1_, fc2_;
  LayerNorm final_norm_;
  // Saved for backward.
  Tensor q_, k_, v_, attn_out_, lse_, fc1_out_;
  BiasedLinear::Saved k_proj_saved_, v_proj_saved_, q_proj_saved_, out_proj_saved_, fc1_saved_, fc2_saved_;
  LayerNorm::Saved attn_norm_saved_, final_norm_saved_;
};

}  // namespace veomni
