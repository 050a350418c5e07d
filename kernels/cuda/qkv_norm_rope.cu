// CUDA qkv_norm_rope_cache_write: one warp per (token, head) of the packed q/k/v projections. A query or key head is
// read once into shared memory, normalised (its sum of squares a warp sum) and rotated in fp32, then stored once: into
// q, or into k and its cache row; a value head is copied into v and its cache row. One launch instead of the q/k
// RMSNorms, rotations and cache writes (six per layer).
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxHeadDim = 512;

struct QkvNormRopeArgs {
  ConstFloats qkv, q_norm, k_norm;
  const float* cos;
  const float* sin;
  const int32_t* dest;
  Floats q, k, v, k_cache, v_cache;
  int64_t hq, hkv, d, cache_rows;
  float eps;
};

__global__ void __launch_bounds__(kWarpsPerBlock* kWarp) qkv_norm_rope_kernel(QkvNormRopeArgs a) {
  __shared__ float head[kWarpsPerBlock][kMaxHeadDim];
  let_next_kernel_launch();
  wait_for_previous_kernel();
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t token = blockIdx.y, heads = a.hq + 2 * a.hkv;
  const int64_t h = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (h >= heads) return;
  const int64_t d = a.d, half = d / 2;
  const int64_t src = (token * heads + h) * d;
  const int64_t target = a.dest[token];
  const bool cached = target >= 0 && target < a.cache_rows;
  if (h >= a.hq + a.hkv) {  // a value head: copied into v and its cache row
    const int64_t vh = h - a.hq - a.hkv;
    for (int64_t i = lane; i < d; i += kWarp) {
      const float value = a.qkv[src + i];
      a.v.store((token * a.hkv + vh) * d + i, value);
      if (cached) a.v_cache.store((target * a.hkv + vh) * d + i, value);
    }
    return;
  }
  const bool is_q = h < a.hq;
  const int64_t kh = h - a.hq;
  const ConstFloats w = is_q ? a.q_norm : a.k_norm;
  float squares = 0.0f;
  for (int64_t i = lane; i < d; i += kWarp) {
    const float value = a.qkv[src + i];
    head[warp][i] = value;
    squares += value * value;
  }
  // rmsnorm_forward's rstd, bit for bit.
  const float r =
      static_cast<float>(1.0 / sqrt(static_cast<double>(warp_sum(squares)) / static_cast<double>(d) + a.eps));
  __syncwarp();
  const float* cos = a.cos + token * d;
  const float* sin = a.sin + token * d;
  for (int64_t i = lane; i < d; i += kWarp) {
    const int64_t partner = i < half ? i + half : i - half;
    const float y = (head[warp][i] * r) * w[i];
    const float y_partner = (head[warp][partner] * r) * w[partner];
    const float rotated = y * cos[i] + (i < half ? -y_partner : y_partner) * sin[i];  // rotate_half = cat(-x2, x1)
    if (is_q) {
      a.q.store((token * a.hq + h) * d + i, rotated);
    } else {
      a.k.store((token * a.hkv + kh) * d + i, rotated);
      if (cached) a.k_cache.store((target * a.hkv + kh) * d + i, rotated);
    }
  }
}

}  // namespace

void qkv_norm_rope_cache_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                               const Tensor& cos, const Tensor& sin, const Tensor& dest, Tensor& q, Tensor& k,
                               Tensor& v, Tensor& k_cache, Tensor& v_cache) {
  const int64_t s = q.dim(0), hq = q.dim(1), d = q.dim(2), hkv = k.dim(1);
  if (s == 0) return;
  VEOMNI_CHECK(d <= kMaxHeadDim, "qkv_norm_rope_cache_write: head_dim {} is above {}", d, kMaxHeadDim);
  const QkvNormRopeArgs args{floats_of(qkv),
                             floats_of(q_norm),
                             floats_of(k_norm),
                             data_of<const float>(cos),
                             data_of<const float>(sin),
                             data_of<const int32_t>(dest),
                             floats_of(q),
                             floats_of(k),
                             floats_of(v),
                             floats_of(k_cache),
                             floats_of(v_cache),
                             hq,
                             hkv,
                             d,
                             k_cache.dim(0) * k_cache.dim(1),
                             eps};
  const int64_t heads = hq + 2 * hkv;
  const dim3 grid(static_cast<unsigned>((heads + kWarpsPerBlock - 1) / kWarpsPerBlock), static_cast<unsigned>(s));
  launch_overlapped(qkv_norm_rope_kernel, grid, dim3(kWarpsPerBlock * kWarp), 0, args);
}

}  // namespace veomni::ops::cuda
