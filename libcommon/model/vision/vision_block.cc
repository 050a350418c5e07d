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
  Parameter* fc1_w = store.add(prefix + "linear_fc1.weight", {c.intermediate_size, c.hidden_size});
  Parameter* fc1_b = store.add(prefix + "linear_fc1.bias", {c.intermediate_size});
  Parameter* fc2_w = store.add(prefix + "linear_fc2.weight", {c.hidden_size, c.intermediate_size});
  Parameter* fc2_b = store.add(prefix + "linear_fc2.bias", {c.hidden_size});
  return VisionMlp(fc1_w, fc1_b, fc2_w, fc2_b, c.tanh_gelu() ? ops::GeluKind::Tanh : ops::GeluKind::Erf);
}

}  // namespace

// Registration order follows transformers' module order (norm1, norm2, attn, mlp).
VisionBlock::VisionBlock(ParamStore& store, const VisionConfig& c, int64_t index)
    : norm1_(make_norm(store, block_prefix(c, index) + "norm1", c)),
      norm2_(make_norm(store, block_prefix(c, index) + "norm2", c)),
      attention_(store, c, block_prefix(c, index) + "attn."),
      mlp_(make_mlp(store, block_prefix(c, index) + "mlp.", c)) {}

Tensor VisionBlock::forward(const Tensor& h, const VisionLayerInputs& in, bool save) {
  Tensor after_attention = attention_.forward(take_out(norm1_.forward(h, save), norm1_saved_), in, save);
  ops::add_(after_attention, h);
  Tensor out = mlp_.forward(take_out(norm2_.forward(after_attention, save), norm2_saved_), save);
  ops::add_(out, after_attention);
  return out;
}

Tensor VisionBlock::backward(const Tensor& dh, const VisionLayerInputs& in) {
  Tensor dmid = norm2_.backward(std::move(norm2_saved_), mlp_.backward(dh));
  ops::add_(dmid, dh);
  Tensor dx = norm1_.backward(std::move(norm1_saved_), attention_.backward(dmid, in));
  ops::add_(dx, dmid);
  return dx;
}

void VisionBlock::release() {
  norm1_saved_ = norm2_saved_ = {};
  attention_.release();
  mlp_.release();
}

}  // namespace veomni
