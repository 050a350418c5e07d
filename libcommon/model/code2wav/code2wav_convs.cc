// Forward passes of code2wav's convolutional pieces over the op API (kernels/ops.h speech ops).
#include "model/code2wav/code2wav_convs.h"

#include "kernels/ops.h"

namespace veomni {

namespace {

Tensor new_like(const Tensor& x, const Shape& shape) { return Tensor::empty(shape, x.dtype(), x.device()); }

}  // namespace

CausalConv1d::CausalConv1d(ParamStore& store, const std::string& module, int64_t in, int64_t out, int64_t kernel,
                           int64_t dilation, int64_t stride, int64_t groups)
    : weight_(store.add(module + ".conv.weight", {out, in / groups, kernel})),
      bias_(store.add(module + ".conv.bias", {out})),
      kernel_(kernel),
      dilation_(dilation),
      stride_(stride),
      groups_(groups) {}

Tensor CausalConv1d::forward(const Tensor& x) const {
  const int64_t length = x.dim(0), span = (kernel_ - 1) * dilation_ + 1, pad = span - stride_;
  // transformers' _get_extra_padding_for_conv1d: right zeros so that ceil((L - span + pad) / stride) + 1 windows fit.
  const int64_t frames = (length - span + pad + stride_ - 1) / stride_ + 1;
  const int64_t extra = (frames - 1) * stride_ + (span - pad) - length;
  const int64_t out_len = (length + pad + extra - span) / stride_ + 1;
  Tensor out = new_like(x, {out_len, weight_->shape[0]});
  ops::conv1d_forward(x, weight_->value, bias_->value, stride_, dilation_, groups_, pad, extra, out);
  return out;
}

CausalTransConv1d::CausalTransConv1d(ParamStore& store, const std::string& module, int64_t in, int64_t out,
                                     int64_t kernel, int64_t stride)
    : weight_(store.add(module + ".conv.weight", {in, out, kernel})),
      bias_(store.add(module + ".conv.bias", {out})),
      kernel_(kernel),
      stride_(stride) {}

Tensor CausalTransConv1d::forward(const Tensor& x) const {
  const int64_t trim = kernel_ - stride_;
  const int64_t full = (x.dim(0) - 1) * stride_ + kernel_;
  Tensor out = new_like(x, {full - 2 * trim, weight_->shape[1]});
  ops::conv_transpose1d_forward(x, weight_->value, bias_->value, stride_, trim, out);
  return out;
}

SnakeBeta::SnakeBeta(ParamStore& store, const std::string& module, int64_t channels)
    : alpha_(store.add(module + ".alpha", {channels})), beta_(store.add(module + ".beta", {channels})) {}

Tensor SnakeBeta::forward(const Tensor& x) const {
  Tensor y = new_like(x, x.shape());
  ops::snake_beta_forward(x, alpha_->value, beta_->value, y);
  return y;
}

ConvNeXtBlock::ConvNeXtBlock(ParamStore& store, const std::string& module, int64_t dim)
    : dwconv_(store, module + ".dwconv", dim, dim, 7, 1, 1, dim),
      norm_(store.add(module + ".norm.weight", {dim}), store.add(module + ".norm.bias", {dim}), 1e-6),
      pwconv1_(store, module + ".pwconv1", 4 * dim, dim),
      pwconv2_(store, module + ".pwconv2", dim, 4 * dim),
      gamma_(store.add(module + ".gamma", {dim})) {}

Tensor ConvNeXtBlock::forward(const Tensor& x) const {
  Tensor h = norm_.forward(dwconv_.forward(x), false).out;
  h = pwconv1_.forward(h, false).out;
  Tensor act = new_like(h, h.shape());
  ops::gelu_forward(h, ops::GeluKind::Erf, act);
  Tensor out = pwconv2_.forward(act, false).out;
  ops::scale_columns_(out, gamma_->value);
  ops::add_(out, x);
  return out;
}

DecoderResidualUnit::DecoderResidualUnit(ParamStore& store, const std::string& module, int64_t dim, int64_t dilation)
    : act1_(store, module + ".act1", dim),
      conv1_(store, module + ".conv1", dim, dim, 7, dilation),
      act2_(store, module + ".act2", dim),
      conv2_(store, module + ".conv2", dim, dim, 1) {}

Tensor DecoderResidualUnit::forward(const Tensor& x) const {
  Tensor out = conv2_.forward(act2_.forward(conv1_.forward(act1_.forward(x))));
  ops::add_(out, x);
  return out;
}

DecoderBlock::DecoderBlock(ParamStore& store, const std::string& module, int64_t in, int64_t out, int64_t rate)
    : act_(store, module + ".block.0", in), upsample_(store, module + ".block.1", in, out, 2 * rate, rate) {
  const int64_t dilations[] = {1, 3, 9};
  for (int64_t i = 0; i < 3; ++i)
    units_.emplace_back(store, module + ".block." + std::to_string(i + 2), out, dilations[i]);
}

Tensor DecoderBlock::forward(const Tensor& x) const {
  Tensor h = upsample_.forward(act_.forward(x));
  for (const DecoderResidualUnit& unit : units_) h = unit.forward(h);
  return h;
}

}  // namespace veomni
