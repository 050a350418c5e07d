// The audio encoder's convolution stem: three Conv2d(3x3, stride 2, padding 1) + erf GELU, then conv_out.
#pragma once
#include <array>
#include <cstdint>

#include "core/tensor.h"
#include "model/param.h"

namespace veomni {

// One Conv2d with bias followed by erf GELU (F.gelu), as im2col + one GEMM per chunk so that the output stays in
// the [B, C, H, W] layout the next convolution reads.
class AudioConv2d {
 public:
  // The input and the pre-activation (the patch matrix is rebuilt in backward: it is 9/4 times the size of x).
  struct Saved {
    Tensor x, z;
  };
  struct Output {
    Tensor out;
    Saved saved;
  };

  // weight [out, in, 3, 3], bias [out].
  AudioConv2d(Parameter* weight, Parameter* bias) : weight_(weight), bias_(bias) {}

  // x [B, in, H, W] -> [B, out, (H-1)/2+1, (W-1)/2+1]; saved is empty unless save.
  Output forward(const Tensor& x, bool save) const;
  // Accumulates the weight and bias gradients; returns dx [B, in, H, W] when need_dx, else an undefined tensor.
  Tensor backward(Saved&& saved, const Tensor& dy, bool need_dx) const;
  // Whether its weight or bias trains (frozen ones get no gradient work).
  bool trains() const { return weight_->trainable || bias_->trainable; }

 private:
  Parameter* weight_;
  Parameter* bias_;
};

class AudioConvStem {
 public:
  struct Saved {
    std::array<AudioConv2d::Saved, 3> convs;
    Tensor features;  // conv2d3's output [B, C, F, T'], for conv_out's weight gradient
  };
  struct Output {
    Tensor out;
    Saved saved;
  };

  // conv2d{1,2,3}.{weight,bias} and conv_out.weight [d_model, channels * freq_bins] (no bias).
  AudioConvStem(const std::array<Parameter*, 3>& conv_weights, const std::array<Parameter*, 3>& conv_biases,
                Parameter* conv_out)
      : convs_{AudioConv2d(conv_weights[0], conv_biases[0]), AudioConv2d(conv_weights[1], conv_biases[1]),
               AudioConv2d(conv_weights[2], conv_biases[2])},
        conv_out_(conv_out) {}

  // chunks [B, 1, mel, T] -> [B * T', d_model], rows (chunk, time): conv_out of the (channel, mel bin) features
  // of every output time step (transformers' permute(0, 3, 1, 2).view(b, t, c * f)). saved is empty unless save.
  Output forward(const Tensor& chunks, bool save) const;
  // dy [B * T', d_model]; accumulates every parameter gradient (the input features need none).
  void backward(Saved&& saved, const Tensor& dy) const;

 private:
  std::array<AudioConv2d, 3> convs_;
  Parameter* conv_out_;
};

}  // namespace veomni
