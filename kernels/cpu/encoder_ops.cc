// CPU encoder ops, the fp32 reference: row statistics and elementwise math in double, rounded once to f32; column
// sums (weight and bias gradients) owned by one thread per column block, so results never depend on the thread count.
#include "kernels/cpu/ops_cpu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_loops.h"

namespace veomni::ops::cpu {
namespace {

// Columns per task of a column-sum pass: each task owns its columns and sums over all rows in order.
constexpr int64_t kEncoderColumnBlock = 64;

constexpr double kSqrtHalf = 0.70710678118654752440;     // 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kGeluCubic = 0.044715;
constexpr int64_t kGeluWork = 40;  // one erf or tanh and a few flops

// sums[c - c0] for c in [c0, c1) = sum over rows of term(row, c), rows in order; then finish(c, sum).
template <typename Term, typename Finish>
void column_sums(int64_t rows, int64_t cols, int64_t work_per_term, const Term& term, const Finish& finish) {
  const int64_t n_blocks = (cols + kEncoderColumnBlock - 1) / kEncoderColumnBlock;
  parallel_for(n_blocks, work_per_term * rows * kEncoderColumnBlock, [&](int64_t blk) {
    const int64_t c0 = blk * kEncoderColumnBlock;
    const int64_t c1 = std::min(cols, c0 + kEncoderColumnBlock);
    double sums[kEncoderColumnBlock] = {};
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t c = c0; c < c1; ++c) sums[c - c0] += term(row, c);
    for (int64_t c = c0; c < c1; ++c) finish(c, sums[c - c0]);
  });
}

double gelu(double x, GeluKind kind) {
  if (kind == GeluKind::Erf) return 0.5 * x * (1.0 + std::erf(x * kSqrtHalf));
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}

// d gelu / dx. Erf: Phi(x) + x phi(x). Tanh: 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 c x^2).
double gelu_slope(double x, GeluKind kind) {
  if (kind == GeluKind::Erf) return 0.5 * (1.0 + std::erf(x * kSqrtHalf)) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
  const double t = std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kGeluCubic * x * x);
}

// The (kernel tap, output index) pairs that read input index i along one axis of a convolution.
struct Tap {
  int64_t k;
  int64_t o;
};

std::vector<std::vector<Tap>> taps_per_input(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t pad) {
  std::vector<std::vector<Tap>> taps(static_cast<size_t>(in));
  for (int64_t o = 0; o < out; ++o)
    for (int64_t k = 0; k < kernel; ++k) {
      const int64_t i = o * stride - pad + k;
      if (i >= 0 && i < in) taps[static_cast<size_t>(i)].push_back({k, o});
    }
  return taps;
}

int64_t conv_out(int64_t in, int64_t kernel, int64_t stride, int64_t pad) {
  return (in + 2 * pad - kernel) / stride + 1;
}

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y, Tensor& mean,
                       Tensor& rstd) {
  const int64_t n = x.dim(0);
  const int64_t d = x.dim(1);
  const float* xp = x.data<float>();
  const float* wp = weight.data<float>();
  const float* bp = bias.data<float>();
  float* yp = y.data<float>();
  float* mp = mean.data<float>();
  float* rp = rstd.data<float>();
  parallel_for(n, 6 * d, [&](int64_t row) {
    const float* xr = xp + row * d;
    float* yr = yp + row * d;
    double total = 0.0;
    for (int64_t i = 0; i < d; ++i) total += xr[i];
    const double mu = d > 0 ? total / static_cast<double>(d) : 0.0;
    // Two passes: the centred sum of squares does not cancel the way E[x^2] - E[x]^2 does.
    double sq = 0.0;
    for (int64_t i = 0; i < d; ++i) {
      const double c = static_cast<double>(xr[i]) - mu;
      sq += c * c;
    }
    const double var = d > 0 ? sq / static_cast<double>(d) : 0.0;
    const double r = 1.0 / std::sqrt(var + static_cast<double>(eps));
    mp[row] = static_cast<float>(mu);
    rp[row] = static_cast<float>(r);
    for (int64_t i = 0; i < d; ++i)
      yr[i] = static_cast<float>((static_cast<double>(xr[i]) - mu) * r * wp[i] + bp[i]);
  });
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor& dx, Tensor& dweight, Tensor& dbias) {
  const int64_t n = x.dim(0);
  const int64_t d = x.dim(1);
  const float* dyp = dy.data<float>();
  const float* xp = x.data<float>();
  const float* wp = weight.data<float>();
  const float* mp = mean.data<float>();
  const float* rp = rstd.data<float>();
  float* dxp = dx.data<float>();
  float* dwp = dweight.data<float>();
  float* dbp = dbias.data<float>();
  const auto xhat = [&](int64_t row, int64_t c) {
    return (static_cast<double>(xp[row * d + c]) - mp[row]) * static_cast<double>(rp[row]);
  };
  column_sums(
      n, d, 4, [&](int64_t row, int64_t c) { return static_cast<double>(dyp[row * d + c]) * xhat(row, c); },
      [&](int64_t c, double s) { dwp[c] = static_cast<float>(static_cast<double>(dwp[c]) + s); });
  column_sums(
      n, d, 1, [&](int64_t row, int64_t c) { return static_cast<double>(dyp[row * d + c]); },
      [&](int64_t c, double s) { dbp[c] = static_cast<float>(static_cast<double>(dbp[c]) + s); });
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w.
  parallel_for(n, 10 * d, [&](int64_t row) {
    const float* dyr = dyp + row * d;
    double sum_g = 0.0, sum_gx = 0.0;
    for (int64_t c = 0; c < d; ++c) {
      const double g = static_cast<double>(dyr[c]) * wp[c];
      sum_g += g;
      sum_gx += g * xhat(row, c);
    }
    const double mean_g = sum_g / static_cast<double>(d);
    const double mean_gx = sum_gx / static_cast<double>(d);
    const double r = rp[row];
    for (int64_t c = 0; c < d; ++c) {
      const double g = static_cast<double>(dyr[c]) * wp[c];
      dxp[row * d + c] = static_cast<float>(r * (g - mean_g - xhat(row, c) * mean_gx));
    }
  });
}

void gelu_forward(const Tensor& x, GeluKind kind, Tensor& y) {
  const int64_t n = x.numel();
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  parallel_for(n, kGeluWork, [&](int64_t i) { yp[i] = static_cast<float>(gelu(xp[i], kind)); });
}

void gelu_backward(const Tensor& dy, const Tensor& x, GeluKind kind, Tensor& dx) {
  const int64_t n = x.numel();
  const float* dyp = dy.data<float>();
  const float* xp = x.data<float>();
  float* dxp = dx.data<float>();
  parallel_for(n, kGeluWork,
               [&](int64_t i) { dxp[i] = static_cast<float>(static_cast<double>(dyp[i]) * gelu_slope(xp[i], kind)); });
}

void add_bias_(Tensor& y, const Tensor& bias) {
  const int64_t n = y.dim(0);
  const int64_t d = y.dim(1);
  float* yp = y.data<float>();
  const float* bp = bias.data<float>();
  parallel_for(n, d, [&](int64_t row) {
    float* __restrict yr = yp + row * d;
    const float* __restrict b = bp;
    for_each_lane(d, [&](int64_t i) { yr[i] += b[i]; });
  });
}

void bias_grad(const Tensor& dy, Tensor& dbias) {
  const int64_t n = dy.dim(0);
  const int64_t d = dy.dim(1);
  const float* dyp = dy.data<float>();
  float* dbp = dbias.data<float>();
  column_sums(
      n, d, 1, [&](int64_t row, int64_t c) { return static_cast<double>(dyp[row * d + c]); },
      [&](int64_t c, double s) { dbp[c] = static_cast<float>(static_cast<double>(dbp[c]) + s); });
}

void im2col_2d(const Tensor& x, int64_t kh, int64_t kw, int64_t stride, int64_t pad, Tensor& cols) {
  const int64_t b = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  const int64_t ho = conv_out(h, kh, stride, pad), wo = conv_out(w, kw, stride, pad);
  const int64_t width = c * kh * kw;
  const float* xp = x.data<float>();
  float* cp = cols.data<float>();
  parallel_for(b * ho * wo, width, [&](int64_t row) {
    const int64_t ox = row % wo;
    const int64_t oy = (row / wo) % ho;
    const int64_t batch = row / (wo * ho);
    float* out = cp + row * width;
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* plane = xp + (batch * c + ch) * h * w;
      for (int64_t ky = 0; ky < kh; ++ky) {
        const int64_t iy = oy * stride - pad + ky;
        for (int64_t kx = 0; kx < kw; ++kx) {
          const int64_t ix = ox * stride - pad + kx;
          const bool inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
          out[(ch * kh + ky) * kw + kx] = inside ? plane[iy * w + ix] : 0.0f;
        }
      }
    }
  });
}

void col2im_2d(const Tensor& dcols, int64_t kh, int64_t kw, int64_t stride, int64_t pad, Tensor& dx) {
  const int64_t b = dx.dim(0), c = dx.dim(1), h = dx.dim(2), w = dx.dim(3);
  const int64_t ho = conv_out(h, kh, stride, pad), wo = conv_out(w, kw, stride, pad);
  const int64_t width = c * kh * kw;
  const float* dcp = dcols.data<float>();
  float* dxp = dx.data<float>();
  // Gathered per input element (each written once, its terms summed in double in a fixed order).
  const auto rows_of = taps_per_input(h, ho, kh, stride, pad);
  const auto cols_of = taps_per_input(w, wo, kw, stride, pad);
  const int64_t taps = std::max<int64_t>(1, (kh / stride + 1) * (kw / stride + 1));
  parallel_for(b * c, h * w * taps, [&](int64_t plane) {
    const int64_t batch = plane / c, ch = plane % c;
    float* out = dxp + plane * h * w;
    for (int64_t iy = 0; iy < h; ++iy)
      for (int64_t ix = 0; ix < w; ++ix) {
        double total = 0.0;
        for (const Tap& ty : rows_of[static_cast<size_t>(iy)])
          for (const Tap& tx : cols_of[static_cast<size_t>(ix)]) {
            const int64_t row = (batch * ho + ty.o) * wo + tx.o;
            total += dcp[row * width + (ch * kh + ty.k) * kw + tx.k];
          }
        out[iy * w + ix] = static_cast<float>(total);
      }
  });
}

}  // namespace veomni::ops::cpu
