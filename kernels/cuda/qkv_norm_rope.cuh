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

// One warp: head h (query heads, then key heads, then value heads) of `token`; `head` is the warp's scratch of d
// floats in shared memory. A query or key head is read once, normalised (its sum of squares a warp sum) and rotated
// in fp32; a value head is taken as is. emit(i, value) receives dimension i's value, each dimension once, from the
// lane that holds it. kHeadDim: a.d when it is known at compile time, 0 otherwise; when it is known, every load (the
// head, its norm's gains, the rotation's cos and sin) goes out at once, before the sum of squares.
template <int kHeadDim = 0, class Emit>
__device__ __forceinline__ void qkv_head_values(const QkvNormRopeArgs& a, int64_t token, int64_t h, float* head,
                                                int lane, Emit&& emit) {
  const int64_t d = kHeadDim > 0 ? kHeadDim : a.d, half = d / 2;
  // Dimension lane + j * 32 of the lane's j-th element; a fixed head_dim gives a fixed count.
  const int per_lane = kHeadDim > 0 ? kHeadDim / kWarp : static_cast<int>((d - lane + kWarp - 1) / kWarp);
  const int64_t src = (token * (a.hq + 2 * a.hkv) + h) * d;
  if (h >= a.hq + a.hkv) {
#pragma unroll
    for (int j = 0; j < per_lane; ++j) emit(lane + j * kWarp, a.qkv[src + lane + j * kWarp]);
    return;
  }
  const ConstFloats w = h < a.hq ? a.q_norm : a.k_norm;
  const float* cos = a.cos + token * d;
  const float* sin = a.sin + token * d;
  auto partner_of = [&](int64_t i) { return i < half ? i + half : i - half; };
  // With a fixed head_dim the gains (the lane's and its partners'), cos and sin are loaded with the head.
  constexpr int kPerLane = kHeadDim > 0 ? kHeadDim / kWarp : 1;
  float gain[kPerLane], partner_gain[kPerLane], own_cos[kPerLane], own_sin[kPerLane];
  if constexpr (kHeadDim > 0) {
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t i = lane + j * kWarp;
      gain[j] = w[i];
      partner_gain[j] = w[partner_of(i)];
      own_cos[j] = cos[i];
      own_sin[j] = sin[i];
    }
  }
  float squares = 0.0f;
#pragma unroll
  for (int j = 0; j < per_lane; ++j) {
    const float value = a.qkv[src + lane + j * kWarp];
    head[lane + j * kWarp] = value;
    squares += value * value;
  }
  // rmsnorm_forward's rstd, bit for bit.
  const float r =
      static_cast<float>(1.0 / sqrt(static_cast<double>(warp_sum(squares)) / static_cast<double>(d) + a.eps));
  __syncwarp();
#pragma unroll
  for (int j = 0; j < per_lane; ++j) {
    const int64_t i = lane + j * kWarp, partner = partner_of(i);
    float y, y_partner, c, sn;
    if constexpr (kHeadDim > 0) {
      y = (head[i] * r) * gain[j];
      y_partner = (head[partner] * r) * partner_gain[j];
      c = own_cos[j];
      sn = own_sin[j];
    } else {
      y = (head[i] * r) * w[i];
      y_partner = (head[partner] * r) * w[partner];
      c = cos[i];
      sn = sin[i];
    }
    emit(i, y * c + (i < half ? -y_partner : y_partner) * sn);  // rotate_half = cat(-x2, x1)
  }
}

// Whether token's destination row is inside the caches (a row outside is not written).
__device__ __forceinline__ bool cache_row_inside(const QkvNormRopeArgs& a, int64_t token) {
  const int64_t target = a.dest[token];
  return target >= 0 && target < a.cache_rows;
}

// Head h of token into q, or into k (or v) and its cache row: qkv_norm_rope_cache_write's unit of work.
__device__ __forceinline__ void qkv_norm_rope_head(const QkvNormRopeArgs& a, int64_t token, int64_t h, float* head,
                                                   int lane) {
  const int64_t d = a.d, target = a.dest[token];
  const bool cached = cache_row_inside(a, token);
  if (h < a.hq) {
    qkv_head_values(a, token, h, head, lane,
                    [&](int64_t i, float value) { a.q.store((token * a.hq + h) * d + i, value); });
  } else if (h < a.hq + a.hkv) {
    const int64_t kh = h - a.hq;
    qkv_head_values(a, token, h, head, lane, [&](int64_t i, float value) {
      a.k.store((token * a.hkv + kh) * d + i, value);
      if (cached) a.k_cache.store((target * a.hkv + kh) * d + i, value);
    });
  } else {
    const int64_t vh = h - a.hq - a.hkv;
    qkv_head_values(a, token, h, head, lane, [&](int64_t i, float value) {
      a.v.store((token * a.hkv + vh) * d + i, value);
      if (cached) a.v_cache.store((target * a.hkv + vh) * d + i, value);
    });
  }
}

}  // namespace veomni::ops::cuda
