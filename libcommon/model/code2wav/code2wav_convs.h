// The convolutional pieces of Qwen3-Omni's code2wav, forward only, on time-major signals [L, C]: causal
// convolution, causal transposed convolution, SnakeBeta, the ConvNeXt upsample block and the decoder's residual
// units and blocks (transformers' Qwen3OmniMoeCausalConvNet, ...CausalTransConvNet, ...SnakeBeta,
// ...ConvNeXtBlock, ...Code2WavDecoderResidualUnit, ...Code2WavDecoderBlock).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/layers/biased_linear.h"
#include "model/layers/layer_norm.h"
#include "model/param.h"

namespace veomni {

// Conv1d padded on the left by span - stride (span = dilation*(K-1)+1) and on the right by what makes the last
// window whole, so output t sees inputs up to t only. Registers `{module}.conv.weight` [Cout, Cin/groups, K] and
// `{module}.conv.bias` [Cout].
class CausalConv1d {
 public:
  CausalConv1d(ParamStore& store, const std::string& module, int64_t in, int64_t out, int64_t kernel,
               int64_t dilation = 1, int64_t stride = 1, int64_t groups = 1);
  // x [L, in] -> [ceil(L / stride), out].
  Tensor forward(const Tensor& x) const;

 private:
  Parameter* weight_;
  Parameter* bias_;
  int64_t kernel_, dilation_, stride_, groups_;
};

// ConvTranspose1d with kernel - stride samples cut at each end. Registers `{module}.conv.weight` [in, out, K]
// and `{module}.conv.bias` [out].
class CausalTransConv1d {
 public:
  CausalTransConv1d(ParamStore& store, const std::string& module, int64_t in, int64_t out, int64_t kernel,
                    int64_t stride);
  // x [L, in] -> [L*stride - (kernel - stride), out].
  Tensor forward(const Tensor& x) const;

 private:
  Parameter* weight_;
  Parameter* bias_;
  int64_t kernel_, stride_;
};

// x + sin^2(x e^alpha) / (e^beta + 1e-9) per channel. Registers `{module}.alpha` and `{module}.beta` [channels].
class SnakeBeta {
 public:
  SnakeBeta(ParamStore& store, const std::string& module, int64_t channels);
  Tensor forward(const Tensor& x) const;

 private:
  Parameter* alpha_;
  Parameter* beta_;
};

// Depthwise causal conv (kernel 7), LayerNorm (eps 1e-6), Linear dim -> 4 dim, GELU, Linear 4 dim -> dim, scaled by
// gamma, plus the input. Registers `{module}.dwconv.conv.*`, `.norm.*`, `.pwconv1.*`, `.pwconv2.*`, `.gamma`.
class ConvNeXtBlock {
 public:
  ConvNeXtBlock(ParamStore& store, const std::string& module, int64_t dim);
  Tensor forward(const Tensor& x) const;

 private:
  CausalConv1d dwconv_;
  LayerNorm norm_;
  BiasedLinear pwconv1_, pwconv2_;
  Parameter* gamma_;
};

// x + conv2(snake2(conv1(snake1(x)))) with conv1 of kernel 7 and `dilation`, conv2 of kernel 1.
class DecoderResidualUnit {
 public:
  DecoderResidualUnit(ParamStore& store, const std::string& module, int64_t dim, int64_t dilation);
  Tensor forward(const Tensor& x) const;

 private:
  SnakeBeta act1_;
  CausalConv1d conv1_;
  SnakeBeta act2_;
  CausalConv1d conv2_;
};

// SnakeBeta, a transposed conv (kernel 2r, stride r) from `in` to `out` channels, then residual units with
// dilations 1, 3, 9: `{module}.block.0` .. `{module}.block.4`.
class DecoderBlock {
 public:
  DecoderBlock(ParamStore& store, const std::string& module, int64_t in, int64_t out, int64_t rate);
  Tensor forward(const Tensor& x) const;

 private:
  SnakeBeta act_;
  CausalTransConv1d upsample_;
  std::vector<DecoderResidualUnit> units_;
};

}  // namespace veomni
