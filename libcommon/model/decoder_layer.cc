// Decoder layer forward and backward; recomputation re-runs the same forward inside backward.
#include "model/decoder_layer.h"

#include <string>
#include <vector>

#include "kernels/decode_ops.h"
#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

namespace {

std::string layer_prefix(const std::string& model_prefix, int64_t index) {
  return model_prefix + "layers." + std::to_string(index) + ".";
}

}  // namespace

DecoderLayer::DecoderLayer(ParamStore& store, const ModelConfig& config, int64_t index, const ExpertHooks* experts,
                           bool recompute, const std::string& model_prefix, bool fp8_linears)
    : recompute_(recompute),
      input_norm_(store.add(layer_prefix(model_prefix, index) + "input_layernorm.weight", {config.hidden_size}),
                  config.rms_norm_eps),
      attention_(store, config, layer_prefix(model_prefix, index), fp8_linears),
      mlp_(config.layer_is_sparse(index) ? nullptr
                                         : std::make_unique<Mlp>(store, layer_prefix(model_prefix, index),
                                                                 config.hidden_size, config.intermediate_size,
                                                                 fp8_linears)),
      moe_(config.layer_is_sparse(index)
               ? std::make_unique<MoeBlock>(store, config, layer_prefix(model_prefix, index), experts)
               : nullptr),
      post_attention_norm_(
          store.add(layer_prefix(model_prefix, index) + "post_attention_layernorm.weight", {config.hidden_size}),
          config.rms_norm_eps) {}

DecoderLayer::Output DecoderLayer::compute(const Tensor& h, const LayerInputs& in, bool save, bool with_stats) const {
  Output result;
  Saved& saved = result.saved;
  Tensor normed_input = take_out(input_norm_.forward(h, save), saved.input_norm);
  // The skip connections ride on the GEMMs that write each block's output (o_proj, down_proj).
  Tensor h1 = take_out(attention_.forward(normed_input, in, save, h.view({-1, h.dim(-1)})), saved.attention);
  Tensor normed = take_out(post_attention_norm_.forward(h1, save), saved.post_attention_norm);
  Tensor out;
  if (moe_) {
    MoeBlock::Output moe = moe_->forward(normed, in, save, with_stats);
    if (with_stats) result.router_stats = std::move(moe.router_stats);
    out = take_out(std::move(moe), saved.moe);
    ops::add_(out, h1);
  } else {
    out = take_out(mlp_->forward(normed, save, h1.view({-1, h1.dim(-1)})), saved.mlp);
  }
  result.out = out;
  return result;
}

DecoderLayer::Output DecoderLayer::forward(const Tensor& h, const LayerInputs& in, bool save) const {
  if (!(save && recompute_)) return compute(h, in, save, true);
  Output result = compute(h, in, false, true);
  result.saved.input = h;
  return result;
}

Tensor DecoderLayer::backward(Saved&& saved, const Tensor& dh, const LayerInputs& in, const Tensor& aux_dprob) const {
  Saved kept = std::move(saved);
  if (recompute_) {
    VEOMNI_CHECK(kept.input.defined(), "decoder layer backward without a saved input");
    kept = compute(kept.input, in, true, false).saved;
  }
  Tensor dnormed = moe_ ? moe_->backward(std::move(kept.moe), dh, in, aux_dprob)
                        : mlp_->backward(std::move(kept.mlp), dh);
  // Each norm's backward adds its block's skip connection (the residual stream's gradient) as it writes dx.
  Tensor dh1 = post_attention_norm_.backward(std::move(kept.post_attention_norm), dnormed, dh);
  Tensor dattention = attention_.backward(std::move(kept.attention), dh1, in);
  return input_norm_.backward(std::move(kept.input_norm), dattention, dh1);
}

void DecoderLayer::fuse_for_decoding() {
  attention_.fuse_qkv();
  if (mlp_) mlp_->fuse_gate_up();
}

bool DecoderLayer::decode_weights(ops::DenseDecodeLayer& layer) const {
  if (!mlp_ || !attention_.decode_weights(layer) || !mlp_->decode_weights(layer)) return false;
  layer.input_norm = input_norm_.weight_value();
  layer.input_norm_eps = input_norm_.eps();
  layer.post_attention_norm = post_attention_norm_.weight_value();
  layer.post_attention_norm_eps = post_attention_norm_.eps();
  return true;
}

bool DecoderLayer::decodes_on_device(int64_t rows) const { return !moe_ || moe_->decodes_on_device(rows); }

void DecoderLayer::forward_cached(Tensor& h, const CachedStep& step, Tensor& k_cache, Tensor& v_cache) const {
  ops::DenseDecodeLayer layer;
  if (step.one_token_each() && decode_weights(layer)) {
    std::vector<Tensor> k_caches{k_cache}, v_caches{v_cache};  // handles of the same storage
    return ops::dense_decode_layers({layer}, step.cos, step.sin, step.write_rows, step.cache_rows, k_caches, v_caches,
                                    h);
  }
  attention_.add_forward_cached(h, input_norm_, step, k_cache, v_cache, h);
  if (!moe_) return mlp_->add_forward_inference(h, post_attention_norm_, h);
  const Tensor normed = post_attention_norm_.forward(h, false).out;
  if (step.one_token_each()) return ops::add_(h, moe_->forward_decode(normed));
  LayerInputs in;  // single process: no expert-parallel seams; every row is real
  in.real_rows = normed.dim(0);
  // Decoding keeps no router statistics.
  ops::add_(h, moe_->forward(normed, in, /*save=*/false, /*with_stats=*/false).out);
}

}  // namespace veomni
