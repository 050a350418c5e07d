// Decoder layer forward and backward; recomputation re-runs the same forward inside backward.
#include "model/decoder_layer.h"

#include <string>

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

namespace {

std::string layer_prefix(const std::string& model_prefix, int64_t index) {
  return model_prefix + "layers." + std::to_string(index) + ".";
}

}  // namespace

DecoderLayer::DecoderLayer(ParamStore& store, const ModelConfig& config, int64_t index, const ExpertHooks* experts,
                           bool recompute, const std::string& model_prefix)
    : recompute_(recompute),
      input_norm_(store.add(layer_prefix(model_prefix, index) + "input_layernorm.weight", {config.hidden_size}),
                  config.rms_norm_eps),
      attention_(store, config, layer_prefix(model_prefix, index)),
      mlp_(config.layer_is_sparse(index) ? nullptr
                                         : std::make_unique<Mlp>(store, layer_prefix(model_prefix, index),
                                                                 config.hidden_size, config.intermediate_size)),
      moe_(config.layer_is_sparse(index)
               ? std::make_unique<MoeBlock>(store, config, layer_prefix(model_prefix, index), experts)
               : nullptr),
      post_attention_norm_(
          store.add(layer_prefix(model_prefix, index) + "post_attention_layernorm.weight", {config.hidden_size}),
          config.rms_norm_eps) {}

Tensor DecoderLayer::compute(const Tensor& h, const LayerInputs& in, bool save) {
  Tensor h1 = take_out(attention_.forward(take_out(input_norm_.forward(h, save), input_norm_saved_), in, save),
                       attention_saved_);
  ops::add_(h1, h);
  Tensor normed = take_out(post_attention_norm_.forward(h1, save), post_attention_norm_saved_);
  Tensor out = moe_ ? moe_->forward(normed, in, save) : take_out(mlp_->forward(normed, save), mlp_saved_);
  ops::add_(out, h1);
  return out;
}

Tensor DecoderLayer::forward(const Tensor& h, const LayerInputs& in, bool save) {
  if (save && recompute_) {
    input_ = h;
    return compute(h, in, false);
  }
  return compute(h, in, save);
}

Tensor DecoderLayer::backward(const Tensor& dh, const LayerInputs& in, const std::vector<float>& aux_dprobs) {
  if (recompute_) {
    VEOMNI_CHECK(input_.defined(), "decoder layer backward without a saved input");
    compute(input_, in, true);
    input_ = Tensor();
  }
  Tensor dnormed = moe_ ? moe_->backward(dh, in, aux_dprobs) : mlp_->backward(std::move(mlp_saved_), dh);
  Tensor dh1 = post_attention_norm_.backward(std::move(post_attention_norm_saved_), dnormed);
  ops::add_(dh1, dh);
  Tensor dattention = attention_.backward(std::move(attention_saved_), dh1, in);
  Tensor dx = input_norm_.backward(std::move(input_norm_saved_), dattention);
  ops::add_(dx, dh1);
  return dx;
}

void DecoderLayer::release() {
  input_ = Tensor();
  input_norm_saved_ = post_attention_norm_saved_ = {};
  attention_saved_ = {};
  mlp_saved_ = {};
  if (moe_) moe_->release();
}

}  // namespace veomni
