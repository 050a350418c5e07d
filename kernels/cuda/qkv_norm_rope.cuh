// The q/k RMSNorm, RoPE and cache write of one (token, head) of a decode step's packed q/k/v projections: the body of
// kernels/cuda/qkv_norm_rope.cu's kernel, shared with the decode-layer kernel (kernels/cuda/decode_layer.cu) so both
// give the same bits.
#pragma once
#include <cstdint>

#include "kernels/cuda/kernel_utils.cuh"

namespace veomni::ops::cuda {

inline constexpr int kQkvNormRopeWarps = 4;  // warps per block: one (token, head) each
inline constexpr int kMaxHeadDim = 512;

struct QkvNormRopeArgs {
  ConstFloats qkv, q_norm, k_norm;
  const float* cos;
  const float* sin;
  const int32_t* dest;
  Floats q, k, v, k_cache, v_cache;
  int64_t hq, hkv, d, cache_rows;
  float eps;
};

// The kernel arguments of qkv_norm_rope_cache_write's operands (kernels/decode_op_list.h).
inline QkvNormRopeArgs qkv_norm_rope_args(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                                          const Tensor& cos, const Tensor& sin, const Tensor& dest, Tensor& q,
                                          Tensor& k, Tensor& v, Tensor& k_cache, Tensor& v_cache) {
  return QkvNormRopeArgs{floats_of(qkv),
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
                         q.dim(1),
                         k.dim(1),
                         q.dim(2),
                         k_cache.dim(0) * k_cache.dim(1),
                         eps};
}

// One warp: head h (query heads, then key heads, then value heads) of `token`; `head` is the warp's scratch of
// kMaxHeadDim floats in shared memory. A query or key head is read once, normalised (its sum of squares a warp sum)
// and rotated in fp32, then stored once: into q, or into k and its cache row; a value head is copied into v and its
// cache row.
__device__ __forceinline__ void qkv_norm_rope_head(const QkvNormRopeArgs& a, int64_t token, int64_t h, float* head,
                                                   int lane) {
  const int64_t d = a.d, half = d / 2;
  const int64_t src = (token * (a.hq + 2 * a.hkv) + h) * d;
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
    head[i] = value;
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
    const float y = (head[i] * r) * w[i];
    const float y_partner = (head[partner] * r) * w[partner];
    const float rotated = y * cos[i] + (i < half ? -y_partner : y_partner) * sin[i];  // rotate_half = cat(-x2, x1)
    if (is_q) {
      a.q.store((token * a.hq + h) * d + i, rotated);
    } else {
      a.k.store((token * a.hkv + kh) * d + i, rotated);
      if (cached) a.k_cache.store((target * a.hkv + kh) * d + i, rotated);
    }
  }
}

}  // namespace veomni::ops::cuda
