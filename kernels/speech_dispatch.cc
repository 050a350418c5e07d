// The op API's front door for the speech ops (talker, code2wav): checks each call, then runs the backend of the
// tensors' device (kernels/cpu/speech_ops.cc, kernels/cuda/speech_ops.cu).
#include <cmath>
#include <string>

#include "core/error.h"
#include "kernels/cpu/ops_cpu.h"
#include "kernels/op_call.h"
#include "kernels/ops.h"

#if defined(VEOMNI_WITH_CUDA) && __has_include("kernels/cuda/ops_cuda.h")
#include "kernels/cuda/ops_cuda.h"
#define VEOMNI_SPEECH_BACKEND(op, device, ...) ((device).is_cuda() ? cuda::op(__VA_ARGS__) : cpu::op(__VA_ARGS__))
#else
#define VEOMNI_SPEECH_BACKEND(op, device, ...) \
  ((device).is_cuda() ? no_cuda_kernels(#op, device) : cpu::op(__VA_ARGS__))
#endif

namespace veomni::ops {
namespace {

// The checks of one speech call.
class SpeechCall : public OpCall {
 public:
  using OpCall::OpCall;

  // Defined, on the call's device, f32 (bf16 too on CUDA), of exactly `shape`.
  void floats(const Tensor& t, const char* name, const Shape& shape) const {
    require(t.defined(), "{} is undefined", name);
    float_dtype(t, name);
    require(t.shape() == shape, "{} is {}, expected shape {}", name, t.describe(), shape_str(shape));
  }
  void disjoint(const Tensor& out, const char* out_name, const Tensor& in, const char* in_name) const {
    if (!out.defined() || !in.defined() || out.numel() == 0 || in.numel() == 0) return;
    const char* o = static_cast<const char*>(out.raw_data());
    const char* i = static_cast<const char*>(in.raw_data());
    require(!(o < i + in.nbytes() && i < o + out.nbytes()), "{} overlaps {} in memory", out_name, in_name);
  }
};

}  // namespace

void conv1d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t dilation,
                    int64_t groups, int64_t pad_left, int64_t pad_right, Tensor& out) {
  const SpeechCall c("conv1d_forward", x);
  c.rank(x, "x", 2);
  c.rank(weight, "weight", 3);
  const int64_t len = x.dim(0), cin = x.dim(1), cout = weight.dim(0), kernel = weight.dim(2);
  c.require(stride >= 1 && dilation >= 1 && groups >= 1, "stride {}, dilation {} and groups {} must be positive",
            stride, dilation, groups);
  c.require(pad_left >= 0 && pad_right >= 0, "negative padding {} / {}", pad_left, pad_right);
  c.require(cin % groups == 0 && cout % groups == 0, "{} input and {} output channels do not split into {} groups",
            cin, cout, groups);
  c.floats(x, "x", {len, cin});
  c.floats(weight, "weight", {cout, cin / groups, kernel});
  if (bias.defined()) c.floats(bias, "bias", {cout});
  const int64_t span = dilation * (kernel - 1) + 1, padded = len + pad_left + pad_right;
  c.require(kernel >= 1 && padded >= span, "kernel span {} is longer than the padded input {}", span, padded);
  c.floats(out, "out", {(padded - span) / stride + 1, cout});
  c.disjoint(out, "out", x, "x");
  VEOMNI_SPEECH_BACKEND(conv1d_forward, c.device(), x, weight, bias, stride, dilation, groups, pad_left, pad_right,
                        out);
}

void conv_transpose1d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
                              int64_t trim_left, Tensor& out) {
  const SpeechCall c("conv_transpose1d_forward", x);
  c.rank(x, "x", 2);
  c.rank(weight, "weight", 3);
  c.rank(out, "out", 2);
  const int64_t len = x.dim(0), cin = x.dim(1), cout = weight.dim(1), kernel = weight.dim(2);
  c.require(stride >= 1 && kernel >= 1, "stride {} and kernel {} must be positive", stride, kernel);
  c.floats(x, "x", {len, cin});
  c.floats(weight, "weight", {cin, cout, kernel});
  if (bias.defined()) c.floats(bias, "bias", {cout});
  const int64_t full = len == 0 ? 0 : (len - 1) * stride + kernel;
  c.require(trim_left >= 0 && trim_left + out.dim(0) <= full, "rows [{}, {}) are outside the full output of {} rows",
            trim_left, trim_left + out.dim(0), full);
  c.floats(out, "out", {out.dim(0), cout});
  c.disjoint(out, "out", x, "x");
  VEOMNI_SPEECH_BACKEND(conv_transpose1d_forward, c.device(), x, weight, bias, stride, trim_left, out);
}

void snake_beta_forward(const Tensor& x, const Tensor& alpha, const Tensor& beta, Tensor& y) {
  const SpeechCall c("snake_beta_forward", x);
  c.rank(x, "x", 2);
  c.floats(x, "x", x.shape());
  c.floats(alpha, "alpha", {x.dim(1)});
  c.floats(beta, "beta", {x.dim(1)});
  c.floats(y, "y", x.shape());
  c.disjoint(y, "y", x, "x");
  VEOMNI_SPEECH_BACKEND(snake_beta_forward, c.device(), x, alpha, beta, y);
}

void scale_columns_(Tensor& x, const Tensor& scale) {
  const SpeechCall c("scale_columns_", x);
  c.rank(x, "x", 2);
  c.floats(x, "x", x.shape());
  c.floats(scale, "scale", {x.dim(1)});
  c.disjoint(x, "x", scale, "scale");
  VEOMNI_SPEECH_BACKEND(scale_columns_, c.device(), x, scale);
}

void silu_forward(const Tensor& x, Tensor& y) {
  const SpeechCall c("silu_forward", x);
  c.floats(x, "x", x.shape());
  c.floats(y, "y", y.shape());
  c.require(x.numel() == y.numel(), "y {} does not match x {}", y.describe(), x.describe());
  c.disjoint(y, "y", x, "x");
  VEOMNI_SPEECH_BACKEND(silu_forward, c.device(), x, y);
}

void sigmoid_gated_add_(Tensor& dst, const Tensor& gate, const Tensor& src) {
  const SpeechCall c("sigmoid_gated_add_", dst);
  c.rank(dst, "dst", 2);
  c.floats(dst, "dst", dst.shape());
  c.floats(gate, "gate", {dst.dim(0), 1});
  c.floats(src, "src", dst.shape());
  c.disjoint(dst, "dst", src, "src");
  c.disjoint(dst, "dst", gate, "gate");
  VEOMNI_SPEECH_BACKEND(sigmoid_gated_add_, c.device(), dst, gate, src);
}

void clamp_(Tensor& x, float lo, float hi) {
  const SpeechCall c("clamp_", x);
  c.floats(x, "x", x.shape());
  c.require(lo <= hi, "lower bound {} is above upper bound {}", lo, hi);
  VEOMNI_SPEECH_BACKEND(clamp_, c.device(), x, lo, hi);
}

void sliding_window_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, int64_t window, float scale,
                                      Tensor& out) {
  const SpeechCall c("sliding_window_attention_forward", q);
  c.rank(q, "q", 3);
  c.rank(k, "k", 3);
  const int64_t s = q.dim(0), hq = q.dim(1), d = q.dim(2), hkv = k.dim(1);
  c.require(hkv >= 1 && hq % hkv == 0, "{} query heads are not a multiple of {} kv heads", hq, hkv);
  c.require(window >= 1, "window {} must be at least 1", window);
  c.floats(q, "q", {s, hq, d});
  c.floats(k, "k", {s, hkv, d});
  c.floats(v, "v", {s, hkv, d});
  c.floats(out, "out", {s, hq, d});
  c.disjoint(out, "out", q, "q");
  c.disjoint(out, "out", k, "k");
  c.disjoint(out, "out", v, "v");
  VEOMNI_SPEECH_BACKEND(sliding_window_attention_forward, c.device(), q, k, v, window, scale, out);
}

}  // namespace veomni::ops
