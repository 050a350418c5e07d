// CPU RMSNorm: y = w * (x * rstd), rstd = 1/sqrt(mean(x^2) + eps), the row statistics summed in double.
#include "kernels/cpu/ops_cpu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_loops.h"

namespace veomni::ops::cpu {
namespace {

// Columns per dweight task: each task owns its columns and sums over all rows in order.
constexpr int64_t kNormColumnBlock = 64;

void normalise_row(int64_t d, const float* __restrict x, const float* __restrict w, float r, float* __restrict y) {
  // Same rounding steps as HF's Qwen3RMSNorm: (x * rstd) first, then the weight.
  for_each_lane(d, [&](int64_t i) { y[i] = (x[i] * r) * w[i]; });
}

// dx = r * (w*dy) - r^3 * x * sum(w*dy*x) / D, the row sum in double.
void backward_row(int64_t d, const float* __restrict dy, const float* __restrict x, const float* __restrict w, float r,
                  float* __restrict dx) {
  double dot = 0.0;
  for (int64_t i = 0; i < d; ++i)
    dot += static_cast<double>(w[i]) * static_cast<double>(dy[i]) * static_cast<double>(x[i]);
  const double rd = r;
  const float coef = static_cast<float>(rd * rd * rd * dot / static_cast<double>(d));
  for_each_lane(d, [&](int64_t i) { dx[i] = r * (w[i] * dy[i]) - coef * x[i]; });
}

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor& rstd) {
  const int64_t n = x.dim(0);
  const int64_t d = x.dim(1);
  const float* xp = x.data<float>();
  const float* wp = weight.data<float>();
  float* yp = y.data<float>();
  float* rp = rstd.data<float>();
  parallel_for(n, 3 * d, [&](int64_t row) {
    const float* xr = xp + row * d;
    const double mean_sq = dot_f64(d, xr, xr) / static_cast<double>(d);
    const float r = static_cast<float>(1.0 / std::sqrt(mean_sq + static_cast<double>(eps)));
    rp[row] = r;
    normalise_row(d, xr, wp, r, yp + row * d);
  });
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                      Tensor& dweight, const Tensor& residual) {
  const int64_t n = x.dim(0);
  const int64_t d = x.dim(1);
  const float* dyp = dy.data<float>();
  const float* xp = x.data<float>();
  const float* wp = weight.data<float>();
  const float* rp = rstd.data<float>();
  float* dxp = dx.data<float>();
  const float* resp = residual.defined() ? residual.data<float>() : nullptr;
  parallel_for(n, 6 * d, [&](int64_t row) {
    float* dxr = dxp + row * d;
    backward_row(d, dyp + row * d, xp + row * d, wp, rp[row], dxr);
    if (resp) for_each_lane(d, [&](int64_t i) { dxr[i] += resp[row * d + i]; });
  });
  if (!dweight.defined()) return;  // a frozen weight
  float* dwp = dweight.data<float>();
  // dweight[i] += sum_n dy[n,i] * x[n,i] * rstd[n]: parallel over column blocks so no two threads share a sum.
  const int64_t n_blocks = (d + kNormColumnBlock - 1) / kNormColumnBlock;
  parallel_for(n_blocks, 3 * n * kNormColumnBlock, [&](int64_t blk) {
    const int64_t c0 = blk * kNormColumnBlock;
    const int64_t c1 = std::min(d, c0 + kNormColumnBlock);
    double sums[kNormColumnBlock] = {};
    for (int64_t row = 0; row < n; ++row) {
      const float* dyr = dyp + row * d;
      const float* xr = xp + row * d;
      const double r = rp[row];
      for (int64_t c = c0; c < c1; ++c) sums[c - c0] += static_cast<double>(dyr[c]) * static_cast<double>(xr[c]) * r;
    }
    for (int64_t c = c0; c < c1; ++c) dwp[c] = static_cast<float>(static_cast<double>(dwp[c]) + sums[c - c0]);
  });
}

}  // namespace veomni::ops::cpu
