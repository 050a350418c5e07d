// CUDA qk_norm_rope_cache_write: one warp per (token, head) of q, k and v. A q or k head is read once into shared
// memory, normalised (its sum of squares a warp sum) and rotated in fp32, then stored once: q in place, k in place and
// into its cache row; a v head is copied into its cache row. One launch instead of the six of rmsnorm_forward,
// rope_apply and kv_cache_write on q and k (and v).
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxHeadDim = 512;

struct QkNormRopeArgs {
  Floats q, k;
  ConstFloats v, q_norm, k_norm;
  const float* cos;
  const float* sin;
  const int32_t* dest;
  Floats k_cache, v_cache;
  int64_t s, hq, hkv, d, cache_rows;
  float eps;
};

__global__ void __launch_bounds__(kWarpsPerBlock* kWarp) qk_norm_rope_kernel(QkNormRopeArgs a) {
  __shared__ float head[kWarpsPerBlock][kMaxHeadDim];
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t token = blockIdx.y;
  const int64_t h = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (h >= a.hq + 2 * a.hkv) return;
  const int64_t d = a.d, half = d / 2;
  const int64_t target = a.dest[token];
  const bool cached = target >= 0 && target < a.cache_rows;
  if (h >= a.hq + a.hkv) {  // a value head: into its cache row as it is
    const int64_t vh = h - a.hq - a.hkv;
    if (cached)
      for (int64_t i = lane; i < d; i += kWarp)
        a.v_cache.store((target * a.hkv + vh) * d + i, a.v[(token * a.hkv + vh) * d + i]);
    return;
  }
  const bool is_q = h < a.hq;
  const int64_t base = is_q ? (token * a.hq + h) * d : (token * a.hkv + (h - a.hq)) * d;
  const Floats x = is_q ? a.q : a.k;
  const ConstFloats w = is_q ? a.q_norm : a.k_norm;
  float squares = 0.0f;
  for (int64_t i = lane; i < d; i += kWarp) {
    const float value = x[base + i];
    head[warp][i] = value;
    squares += value * value;
  }
  // rmsnorm_forward's rstd, bit for bit.
  const float r = static_cast<float>(1.0 / sqrt(static_cast<double>(warp_sum(squares)) / static_cast<double>(d) + a.eps));
  __syncwarp();
  const float* cos = a.cos + token * d;
  const float* sin = a.sin + token * d;
  for (int64_t i = lane; i < d; i += kWarp) {
    const int64_t partner = i < half ? i + half : i - half;
    const float y = (head[warp][i] * r) * w[i];
    const float y_partner = (head[warp][partner] * r) * w[partner];
    const float rotated = y * cos[i] + (i < half ? -y_partner : y_partner) * sin[i];  // rotate_half = cat(-x2, x1)
    x.store(base + i, rotated);
    if (!is_q && cached) a.k_cache.store((target * a.hkv + (h - a.hq)) * d + i, rotated);
  }
}

}  // namespace

void qk_norm_rope_cache_write(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm, const Tensor& k_norm,
                              float eps, const Tensor& cos, const Tensor& sin, const Tensor& dest, Tensor& k_cache,
                              Tensor& v_cache) {
  const int64_t s = q.dim(0), hq = q.dim(1), d = q.dim(2), hkv = k.dim(1);
  if (s == 0) return;
  VEOMNI_CHECK(d <= kMaxHeadDim, "qk_norm_rope_cache_write: head_dim {} is above {}", d, kMaxHeadDim);
  const QkNormRopeArgs args{floats_of(q),
                            floats_of(k),
                            floats_of(v),
                            floats_of(q_norm),
                            floats_of(k_norm),
                            data_of<const float>(cos),
                            data_of<const float>(sin),
                            data_of<const int32_t>(dest),
                            floats_of(k_cache),
                            floats_of(v_cache),
                            s,
                            hq,
                            hkv,
                            d,
                            k_cache.dim(0) * k_cache.dim(1),
                            eps};
  const int64_t heads = hq + 2 * hkv;
  const dim3 grid(static_cast<unsigned>((heads + kWarpsPerBlock - 1) / kWarpsPerBlock), static_cast<unsigned>(s));
  qk_norm_rope_kernel<<<grid, kWarpsPerBlock * kWarp, 0, cuda_rt::stream()>>>(args);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
