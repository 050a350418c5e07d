// CUDA qkv_norm_rope_forward and qkv_norm_rope_backward: one warp per (token, head) of the packed q/k/v projections,
// the head in the warp's registers (lane l holds dimensions [l * D/32, (l + 1) * D/32), so the partner of a rotation
// pair sits in lane l ^ 16), read once and written once, f32 from load to store.
#include <cmath>
#include <initializer_list>

#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr unsigned kFullMask = 0xffffffffu;

// The packed head of a warp: token and head h of the (Hq + 2 Hkv) per token, and the lane's first dimension.
struct HeadSlot {
  int64_t token;
  int64_t h;
  int first;
  bool valid;
};

template <int kPer>
__device__ __forceinline__ HeadSlot head_slot(int64_t s, int64_t heads) {
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  return {warp / heads, warp % heads, lane * kPer, warp < s * heads};
}

// Within a rotation pair the lower half's lane (lane < 16) holds dimension i and its partner i + D/2 sits in lane ^ 16.
__device__ __forceinline__ bool lower_half() { return threadIdx.x % kWarp < kWarp / 2; }

template <int kPer>
__device__ __forceinline__ void partner_values(const float (&own)[kPer], float (&partner)[kPer]) {
#pragma unroll
  for (int j = 0; j < kPer; ++j) partner[j] = __shfl_xor_sync(kFullMask, own[j], kWarp / 2);
}

// rmsnorm_forward's rstd of a head whose squares sum to sq.
__device__ __forceinline__ float head_rstd(float sq, int d, float eps) {
  return static_cast<float>(1.0 / sqrt(static_cast<double>(sq) / static_cast<double>(d) + eps));
}

template <typename T, typename TW, int kPer>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp)
    forward_heads(const T* qkv, const TW* q_norm, const TW* k_norm, float eps, const float* cos, const float* sin, T* q,
                  T* k, T* v, float* q_rstd, float* k_rstd, int64_t s, int64_t hq, int64_t hkv) {
  constexpr int kD = kPer * kWarp;
  const int64_t heads = hq + 2 * hkv;
  const HeadSlot slot = head_slot<kPer>(s, heads);
  if (!slot.valid) return;  // the whole warp
  float x[kPer];
  packed::load<T, kPer>(qkv + (slot.token * heads + slot.h) * kD + slot.first, x);
  if (slot.h >= hq + hkv) {
    packed::store<T, kPer>(v + (slot.token * hkv + slot.h - hq - hkv) * kD + slot.first, x);
    return;
  }
  const bool is_q = slot.h < hq;
  float sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) sq += x[j] * x[j];
  const float r = head_rstd(packed::group_sum<kWarp>(sq), kD, eps);
  float gain[kPer], c[kPer], sn[kPer], y[kPer], partner[kPer];
  packed::load<TW, kPer>((is_q ? q_norm : k_norm) + slot.first, gain);
  packed::load<float, kPer>(cos + slot.token * kD + slot.first, c);
  packed::load<float, kPer>(sin + slot.token * kD + slot.first, sn);
  // HF's order of roundings: (x * rstd) first, then the weight.
#pragma unroll
  for (int j = 0; j < kPer; ++j) y[j] = (x[j] * r) * gain[j];
  partner_values<kPer>(y, partner);
  const bool low = lower_half();
  float out[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) out[j] = y[j] * c[j] + (low ? -partner[j] : partner[j]) * sn[j];  // rotate_half
  const int64_t row = is_q ? slot.token * hq + slot.h : slot.token * hkv + slot.h - hq;
  packed::store<T, kPer>((is_q ? q : k) + row * kD + slot.first, out);
  if (slot.first == 0) (is_q ? q_rstd : k_rstd)[row] = r;
}

// The inverse rotation (rope_apply's transpose: lower dimension i gets dy_i cos_i + dy_p sin_p, upper i gets
// dy_i cos_i - dy_p sin_p for its partner p), then rmsnorm_backward's dx = r (w du) - r^3 x sum(w du x) / D.
template <typename T, typename TW, int kPer>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp)
    backward_heads(const T* dq, const T* dk, const T* dv, const T* qkv, const TW* q_norm, const TW* k_norm,
                   const float* q_rstd, const float* k_rstd, const float* cos, const float* sin, T* dqkv, int64_t s,
                   int64_t hq, int64_t hkv) {
  constexpr int kD = kPer * kWarp;
  const int64_t heads = hq + 2 * hkv;
  const HeadSlot slot = head_slot<kPer>(s, heads);
  if (!slot.valid) return;  // the whole warp
  T* dst = dqkv + (slot.token * heads + slot.h) * kD + slot.first;
  float dy[kPer];
  if (slot.h >= hq + hkv) {
    packed::load<T, kPer>(dv + (slot.token * hkv + slot.h - hq - hkv) * kD + slot.first, dy);
    packed::store<T, kPer>(dst, dy);
    return;
  }
  const bool is_q = slot.h < hq;
  const int64_t row = is_q ? slot.token * hq + slot.h : slot.token * hkv + slot.h - hq;
  packed::load<T, kPer>((is_q ? dq : dk) + row * kD + slot.first, dy);
  float c[kPer], sn[kPer], dy_partner[kPer], sn_partner[kPer];
  packed::load<float, kPer>(cos + slot.token * kD + slot.first, c);
  packed::load<float, kPer>(sin + slot.token * kD + slot.first, sn);
  partner_values<kPer>(dy, dy_partner);
  partner_values<kPer>(sn, sn_partner);
  const bool low = lower_half();
  float du[kPer], x[kPer], gain[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) du[j] = dy[j] * c[j] + (low ? dy_partner[j] : -dy_partner[j]) * sn_partner[j];
  packed::load<T, kPer>(qkv + (slot.token * heads + slot.h) * kD + slot.first, x);
  packed::load<TW, kPer>((is_q ? q_norm : k_norm) + slot.first, gain);
  float dot = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) dot += gain[j] * du[j] * x[j];
  dot = packed::group_sum<kWarp>(dot);
  const float r = (is_q ? q_rstd : k_rstd)[row];
  const double rd = r;
  const float coef = static_cast<float>(rd * rd * rd * static_cast<double>(dot) / static_cast<double>(kD));
  float dx[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) dx[j] = r * (gain[j] * du[j]) - coef * x[j];
  packed::store<T, kPer>(dst, dx);
}

// Calls f(T, TW, kPer) for the activations' and gains' element types and D / 32 lanes' worth of dimensions (the
// dispatcher admits D of 32 to 512, powers of two). Every tensor must start on a 16-byte boundary (a lane moves its
// dimensions in one access of up to 16 bytes).
template <typename F>
void with_head_types(const Tensor& activations, const Tensor& gains, int64_t d,
                     std::initializer_list<const Tensor*> all, F&& f) {
  for (const Tensor* t : all)
    VEOMNI_CHECK(packed::aligned16(t->raw_data()), "qkv_norm_rope: {} does not start on a 16-byte boundary",
                 t->describe());
  packed::with_float_type(activations.dtype(), [&](auto t_tag) {
    packed::with_float_type(gains.dtype(), [&](auto w_tag) {
      using std::integral_constant;
      switch (d) {
        case 32: return f(t_tag, w_tag, integral_constant<int, 1>{});
        case 64: return f(t_tag, w_tag, integral_constant<int, 2>{});
        case 128: return f(t_tag, w_tag, integral_constant<int, 4>{});
        case 256: return f(t_tag, w_tag, integral_constant<int, 8>{});
        case 512: return f(t_tag, w_tag, integral_constant<int, 16>{});
        default: VEOMNI_CHECK(false, "qkv_norm_rope: head_dim {} is not 32, 64, 128, 256 or 512", d);
      }
    });
  });
}

unsigned blocks_for(int64_t s, int64_t heads) {
  return static_cast<unsigned>((s * heads + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

void qkv_norm_rope_forward(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps, const Tensor& cos,
                           const Tensor& sin, Tensor& q, Tensor& k, Tensor& v, Tensor& q_rstd, Tensor& k_rstd) {
  const int64_t s = q.dim(0), hq = q.dim(1), d = q.dim(2), hkv = k.dim(1);
  if (s == 0) return;
  const auto tensors = {&qkv, &q_norm, &k_norm, &cos, &sin, &static_cast<const Tensor&>(q),
                        &static_cast<const Tensor&>(k), &static_cast<const Tensor&>(v)};
  with_head_types(qkv, q_norm, d, tensors, [&](auto t_tag, auto w_tag, auto per) {
    using T = decltype(t_tag);
    using TW = decltype(w_tag);
    forward_heads<T, TW, decltype(per)::value>
        <<<blocks_for(s, hq + 2 * hkv), kWarpsPerBlock * kWarp, 0, cuda_rt::stream()>>>(
            data_of<const T>(qkv), data_of<const TW>(q_norm), data_of<const TW>(k_norm), eps, data_of<const float>(cos),
            data_of<const float>(sin), data_of<T>(q), data_of<T>(k), data_of<T>(v), data_of<float>(q_rstd),
            data_of<float>(k_rstd), s, hq, hkv);
  });
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void qkv_norm_rope_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& qkv,
                            const Tensor& q_norm, const Tensor& k_norm, const Tensor& q_rstd, const Tensor& k_rstd,
                            const Tensor& cos, const Tensor& sin, Tensor& dqkv) {
  const int64_t s = dq.dim(0), hq = dq.dim(1), d = dq.dim(2), hkv = dk.dim(1);
  if (s == 0) return;
  const auto tensors = {&dq, &dk, &dv, &qkv, &q_norm, &k_norm, &cos, &sin, &static_cast<const Tensor&>(dqkv)};
  with_head_types(qkv, q_norm, d, tensors, [&](auto t_tag, auto w_tag, auto per) {
    using T = decltype(t_tag);
    using TW = decltype(w_tag);
    backward_heads<T, TW, decltype(per)::value>
        <<<blocks_for(s, hq + 2 * hkv), kWarpsPerBlock * kWarp, 0, cuda_rt::stream()>>>(
            data_of<const T>(dq), data_of<const T>(dk), data_of<const T>(dv), data_of<const T>(qkv),
            data_of<const TW>(q_norm), data_of<const TW>(k_norm), data_of<const float>(q_rstd),
            data_of<const float>(k_rstd), data_of<const float>(cos), data_of<const float>(sin), data_of<T>(dqkv), s, hq,
            hkv);
  });
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
