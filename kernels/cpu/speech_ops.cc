// CPU speech ops, the fp32 reference: sums in double over a fixed order, rounded once to f32; every output element
// is owned by one task, so results never depend on the thread count.
#include "kernels/cpu/ops_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/parallel.h"

namespace veomni::ops::cpu {
namespace {

double bias_at(const Tensor& bias, int64_t o) { return bias.defined() ? bias.data<float>()[o] : 0.0; }

}  // namespace

void conv1d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t dilation,
                    int64_t groups, int64_t pad_left, int64_t /*pad_right*/, Tensor& out) {
  const int64_t len = x.dim(0), cin = x.dim(1), cout = weight.dim(0), cg = weight.dim(1), kernel = weight.dim(2);
  const int64_t out_len = out.dim(0), cout_per_group = cout / groups;
  const float* xp = x.data<float>();
  const float* wp = weight.data<float>();
  float* op = out.data<float>();
  parallel_for(out_len, cout * cg * kernel * 2, [&](int64_t t) {
    for (int64_t o = 0; o < cout; ++o) {
      const int64_t c0 = (o / cout_per_group) * cg;
      double acc = bias_at(bias, o);
      for (int64_t k = 0; k < kernel; ++k) {
        const int64_t src = t * stride + k * dilation - pad_left;
        if (src < 0 || src >= len) continue;  // the zero padding
        const float* row = xp + src * cin + c0;
        const float* w = wp + (o * cg) * kernel + k;
        for (int64_t c = 0; c < cg; ++c) acc += static_cast<double>(w[c * kernel]) * row[c];
      }
      op[t * cout + o] = static_cast<float>(acc);
    }
  });
}

void conv_transpose1d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
                              int64_t trim_left, Tensor& out) {
  const int64_t len = x.dim(0), cin = x.dim(1), cout = weight.dim(1), kernel = weight.dim(2);
  const int64_t out_len = out.dim(0);
  const float* xp = x.data<float>();
  const float* wp = weight.data<float>();
  float* op = out.data<float>();
  // Gathers per output row (s = i*stride + k): deterministic, no scattered accumulation.
  parallel_for(out_len, cout * cin * ((kernel + stride - 1) / stride) * 2, [&](int64_t t) {
    const int64_t s = t + trim_left;
    std::vector<double> acc(static_cast<size_t>(cout));
    for (int64_t o = 0; o < cout; ++o) acc[static_cast<size_t>(o)] = bias_at(bias, o);
    for (int64_t k = s % stride; k < kernel; k += stride) {
      const int64_t i = (s - k) / stride;
      if (i < 0) break;
      if (i >= len) continue;
      for (int64_t c = 0; c < cin; ++c) {
        const double xv = xp[i * cin + c];
        const float* w = wp + c * cout * kernel + k;
        for (int64_t o = 0; o < cout; ++o) acc[static_cast<size_t>(o)] += xv * w[o * kernel];
      }
    }
    for (int64_t o = 0; o < cout; ++o) op[t * cout + o] = static_cast<float>(acc[static_cast<size_t>(o)]);
  });
}

void snake_beta_forward(const Tensor& x, const Tensor& alpha, const Tensor& beta, Tensor& y) {
  const int64_t rows = x.dim(0), ch = x.dim(1);
  const float* xp = x.data<float>();
  const float* ap = alpha.data<float>();
  const float* bp = beta.data<float>();
  float* yp = y.data<float>();
  std::vector<double> freq(static_cast<size_t>(ch)), inv_mag(static_cast<size_t>(ch));
  for (int64_t c = 0; c < ch; ++c) {
    // transformers computes exp(alpha) and 1/(exp(beta) + 1e-9) in f32 before the product.
    freq[static_cast<size_t>(c)] = std::exp(ap[c]);
    inv_mag[static_cast<size_t>(c)] = 1.0 / (static_cast<double>(static_cast<float>(std::exp(bp[c]))) + 1e-9);
  }
  parallel_for(rows, ch * 30, [&](int64_t r) {
    for (int64_t c = 0; c < ch; ++c) {
      const double v = xp[r * ch + c];
      const double s = std::sin(v * static_cast<float>(freq[static_cast<size_t>(c)]));
      yp[r * ch + c] = static_cast<float>(v + inv_mag[static_cast<size_t>(c)] * s * s);
    }
  });
}

void scale_columns_(Tensor& x, const Tensor& scale) {
  const int64_t rows = x.dim(0), ch = x.dim(1);
  float* xp = x.data<float>();
  const float* sp = scale.data<float>();
  parallel_for(rows, ch, [&](int64_t r) {
    for (int64_t c = 0; c < ch; ++c) xp[r * ch + c] *= sp[c];
  });
}

void silu_forward(const Tensor& x, Tensor& y) {
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const int64_t n = x.numel();
  parallel_for(n, 20, [&](int64_t i) {
    const double v = xp[i];
    yp[i] = static_cast<float>(v / (1.0 + std::exp(-v)));
  });
}

void sigmoid_gated_add_(Tensor& dst, const Tensor& gate, const Tensor& src) {
  const int64_t rows = dst.dim(0), d = dst.dim(1);
  float* dp = dst.data<float>();
  const float* gp = gate.data<float>();
  const float* sp = src.data<float>();
  parallel_for(rows, d * 2, [&](int64_t r) {
    const double g = 1.0 / (1.0 + std::exp(-static_cast<double>(gp[r])));
    for (int64_t c = 0; c < d; ++c) dp[r * d + c] = static_cast<float>(dp[r * d + c] + g * sp[r * d + c]);
  });
}

void clamp_(Tensor& x, float lo, float hi) {
  float* xp = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) xp[i] = std::min(std::max(xp[i], lo), hi);
}

void sliding_window_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, int64_t window, float scale,
                                      Tensor& out) {
  const int64_t seq = q.dim(0), hq = q.dim(1), dim = q.dim(2), hkv = k.dim(1), rep = hq / hkv;
  const float* qp = q.data<float>();
  const float* kp = k.data<float>();
  const float* vp = v.data<float>();
  float* op = out.data<float>();
  parallel_for(seq * hq, std::min(seq, window) * dim * 4, [&](int64_t item) {
    const int64_t i = item / hq, h = item % hq, kvh = h / rep;
    const int64_t first = std::max<int64_t>(0, i - window + 1);
    const float* qi = qp + (i * hq + h) * dim;
    std::vector<double> scores(static_cast<size_t>(i - first + 1));
    double top = -std::numeric_limits<double>::infinity();
    for (int64_t j = first; j <= i; ++j) {
      const float* kj = kp + (j * hkv + kvh) * dim;
      double dot = 0;
      for (int64_t d = 0; d < dim; ++d) dot += static_cast<double>(qi[d]) * kj[d];
      scores[static_cast<size_t>(j - first)] = dot * scale;
      top = std::max(top, dot * scale);
    }
    double total = 0;
    for (double& s : scores) total += (s = std::exp(s - top));
    float* oi = op + (i * hq + h) * dim;
    for (int64_t d = 0; d < dim; ++d) {
      double acc = 0;
      for (int64_t j = first; j <= i; ++j) acc += scores[static_cast<size_t>(j - first)] * vp[(j * hkv + kvh) * dim + d];
      oi[d] = static_cast<float>(acc / total);
    }
  });
}

}  // namespace veomni::ops::cpu
