// One Qwen3 / Qwen3-MoE decoder layer (pre-norm attention + dense or sparse MLP), with optional recomputation.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/attention.h"
#include "model/layer_inputs.h"
#include "model/layers/rmsnorm.h"
#include "model/mlp.h"
#include "model/model_config.h"
#include "model/moe.h"
#include "model/param.h"

namespace veomni {

class DecoderLayer {
 public:
  // Registers `{model_prefix}layers.{index}.*` in the store's current group.
  DecoderLayer(ParamStore& store, const ModelConfig& config, int64_t index, const ExpertHooks* experts,
               bool recompute, const std::string& model_prefix = "model.");

  // h [S_local, hidden] -> h + attn(...) + mlp(...). With save and recompute only h is kept.
  Tensor forward(const Tensor& h, const LayerInputs& in, bool save);
  // aux_dprobs: see MoeBlock::backward (ignored by a dense layer).
  Tensor backward(const Tensor& dh, const LayerInputs& in, const std::vector<float>& aux_dprobs);
  // Statistics of the last forward's router; null for a dense layer.
  const RouterStats* router_stats() const { return moe_ ? &moe_->router_stats() : nullptr; }
  void release();

 private:
  Tensor compute(const Tensor& h, const LayerInputs& in, bool save);

  bool recompute_;
  RmsNorm input_norm_;
  Attention attention_;
  std::unique_ptr<Mlp> mlp_;
  std::unique_ptr<MoeBlock> moe_;
  RmsNorm post_attention_norm_;
  Tensor input_;  // kept for recomputation
  RmsNorm::Saved input_norm_saved_, post_attention_norm_saved_;
  Attention::Saved attention_saved_;
  Mlp::Saved mlp_saved_;
};

}  // namespace veomni
