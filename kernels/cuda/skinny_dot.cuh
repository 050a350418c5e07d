// The dot products of the skinny decode GEMM (kernels/cuda/gemm_skinny.cu), shared with the decode-layer kernel
// (kernels/cuda/decode_layer.cu) so that both give the same bits: x's rows (optionally RMS-normalised) against one
// weight row in 16-byte chunks, lane l taking chunks l, l + 32, ... in ascending order, fp32 accumulation; and the
// SwiGLU epilogue they and the MoE decode kernels (kernels/cuda/moe_decode.cu) share.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/gemm_skinny.h"
#include "kernels/cuda/kernel_utils.cuh"

namespace veomni::ops::cuda {

inline constexpr int kChunk = 8;  // bf16 per 16-byte load

__device__ __forceinline__ void unpack(const uint4& raw, float (&out)[kChunk]) {
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
  for (int i = 0; i < kChunk / 2; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// rmsnorm_forward's rstd of one bf16 row of k elements (a multiple of 8), computed by a warp: each lane's sum of
// squares over chunks lane, lane + 32, ..., then the butterfly; every lane gets it.
__device__ __forceinline__ float row_rstd(const __nv_bfloat16* row, int64_t k, float eps, int lane) {
  float sq = 0.0f;
  for (int64_t c = lane; c < k / kChunk; c += kWarp) {
    float xf[kChunk];
    unpack(reinterpret_cast<const uint4*>(row)[c], xf);
    for (int i = 0; i < kChunk; ++i) sq += xf[i] * xf[i];
  }
  sq = warp_sum(sq);
  return static_cast<float>(1.0 / sqrt(static_cast<double>(sq) / static_cast<double>(k) + eps));
}

// The rows of x as the dot products read them: as stored, or normalised by RMSNorm (kNorm) with the bits of
// rmsnorm_forward's bf16 kernel (kernels/cuda/norm.cu): the same per-lane sums of squares over the same chunks, the
// same butterfly, the same rstd expression, (x * rstd) * gain rounded to bf16. x is read with plain loads: it was
// written by a kernel before, or by other blocks of this one before a grid barrier.
template <bool kNorm>
struct XRows {
  const __nv_bfloat16* x;
  const __nv_bfloat16* gain;
  int64_t m, k;
  float rstd[kSkinnyMaxRows];

  __device__ __forceinline__ XRows(const __nv_bfloat16* x_rows, const __nv_bfloat16* norm_gain, float eps,
                                   int64_t rows, int64_t columns, int lane)
      : x(x_rows), gain(norm_gain), m(rows), k(columns) {
    if constexpr (kNorm) {
      for (int r = 0; r < kSkinnyMaxRows; ++r) {
        if (r >= m) break;
        rstd[r] = row_rstd(x + r * k, k, eps, lane);
      }
    }
  }

  // xf = chunk c of row r; gf: chunk c of the gain (read once per chunk by the caller).
  __device__ __forceinline__ void load(int r, int64_t c, const float (&gf)[kChunk], float (&xf)[kChunk]) const {
    unpack(reinterpret_cast<const uint4*>(x + r * k)[c], xf);
    if constexpr (kNorm)
      for (int i = 0; i < kChunk; ++i) xf[i] = __bfloat162float(__float2bfloat16_rn((xf[i] * rstd[r]) * gf[i]));
  }

  __device__ __forceinline__ void load_gain(int64_t c, float (&gf)[kChunk]) const {
    if constexpr (kNorm) unpack(__ldg(reinterpret_cast<const uint4*>(gain) + c), gf);
  }
};

// acc[r] += x[r, chunk c] . w.
template <bool kNorm>
__device__ __forceinline__ void accumulate_chunk(const XRows<kNorm>& x, const uint4& w, int64_t c,
                                                 float (&acc)[kSkinnyMaxRows]) {
  float wf[kChunk], gf[kChunk];
  unpack(w, wf);
  x.load_gain(c, gf);
  for (int r = 0; r < kSkinnyMaxRows; ++r) {
    if (r >= x.m) break;
    float xf[kChunk];
    x.load(r, c, gf, xf);
    for (int i = 0; i < kChunk; ++i) acc[r] += wf[i] * xf[i];
  }
}

// The skinny kernels' epilogues, per row r of a column: out = bf16(sum) (+ out's old value first when accumulating).
__device__ __forceinline__ __nv_bfloat16 column_result(float sum, bool accumulate, __nv_bfloat16 old) {
  if (accumulate) sum += __bfloat162float(old);
  return __float2bfloat16_rn(sum);
}

// SwiGLU of a gate and an up sum: each rounded to T (as a GEMM's output is), then silu(g) * u in fp32
// (swiglu_fused_forward's math), rounded to T.
template <typename T = __nv_bfloat16>
__device__ __forceinline__ T swiglu_result(float gate_sum, float up_sum) {
  const float g = packed::as_float(packed::rounded<T>(gate_sum));
  const float u = packed::as_float(packed::rounded<T>(up_sum));
  return packed::rounded<T>(g * (1.0f / (1.0f + expf(-g))) * u);
}

}  // namespace veomni::ops::cuda
