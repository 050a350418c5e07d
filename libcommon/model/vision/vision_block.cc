// Vision block forward and backward (residual gradients added with ops::add_).
#include "model/vision/vision_block.h"

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

namespace {

std::string block_prefix(const VisionConfig& c, int64_t index) {
  return c.param_prefix + "blocks." + std::to_string(index) + ".";
}

LayerNorm make_norm(ParamStore& store, const std::string& name, const VisionConfig& c) {
  Parameter* weight = store.add(name + ".weight", {c.hidden_size});
  Parameter* bias = store.add(name + ".bias", {c.hidden_size});
  return LayerNorm(weight, bias, c.layer_norm_eps);
}

VisionMlp make_mlp(ParamStore& store, const std::string& prefix, const VisionConfig& c) {
  BiasedLinear fc1(store, prefix + "linear_fc1", c.intermediate_size, c.hidden_size);
  BiasedLinear fc2(store, prefix + "linear_fc2", c.hidden_size, c.intermediate_size);
  return VisionMlp(fc1, fc2, c.tanh_gelu() ? ops::GeluKind::Tanh : ops::GeluKind::Erf);
}

}  // namespace

// Registration order follows transformers' module order (norm1, norm2, attn, mlp).
VisionBlock::VisionBlock(ParamStore& store, const VisionConfig& c, int64_t index)
    : norm1_(make_norm(store, block_prefix(c, index) + "norm1", c)),
      norm2_(make_norm(store, block_prefix(c, index) + "norm2", c)),
      attention_(store, c, block_prefix(c, index) + "attn."),
      mlp_(make_mlp(store, block_prefix(c, index) + "mlp.", c)) {}

VisionBlock::Output VisionBlock::forward(const Tensor& h, const VisionLayerInputs& in, bool save) const {
  Output result;
  Saved& saved = result.saved;
  Tensor normed1 = take_out(norm1_.forward(h, save), saved.norm1);
  Tensor after_attention = take_out(attention_.forward(normed1, in, save), saved.attention);
  ops::add_(after_attention, h);
  Tensor normed2 = take_out(norm2_.forward(after_attention, save), saved.norm2);
  Tensor out = take_out(mlp_.forward(normed2, save), saved.mlp);
  ops::add_(out, after_attention);
  result.out = out;
  return result;
}

Tensor VisionBlock::backward(Saved&& saved, const Tensor& dh, const VisionLayerInputs& in) const {
  Saved kept = std::move(saved);
  Tensor dnormed2 = mlp_.backward(std::move(kept.mlp), dh);
  Tensor dmid = norm2_.backward(std::move(kept.norm2), dnormed2);
  ops::add_(dmid, dh);
  Tensor dnormed1 = attention_.backward(std::move(kept.attention), dmid, in);
  Tensor dx = norm1_.backward(std::move(kept.norm1), dnormed1);
  ops::add_(dx, dmid);
  return dx;
}

}  // namespace veomni
