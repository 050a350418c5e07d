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
// written by a kernel before, or by other blocks of this one before a grid barrier. kRows: the most rows (m <= kRows),
// 1 for a single row's fewer registers.
template <bool kNorm, int kRows = kSkinnyMaxRows>
struct XRows {
  const __nv_bfloat16* x;
  const __nv_bfloat16* gain;
  int64_t m, k;
  float rstd[kRows];

  __device__ __forceinline__ XRows(const __nv_bfloat16* x_rows, const __nv_bfloat16* norm_gain, float eps,
                                   int64_t rows, int64_t columns, int lane)
      : x(x_rows), gain(norm_gain), m(rows), k(columns) {
    if constexpr (kNorm) {
      for (int r = 0; r < kRows; ++r) {
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

// x's rows [m, k] as dot products read them, staged in shared memory as 16-byte chunks by a block of kThreads: as
// stored, or normalised by RMSNorm (kNorm) with the bits of XRows: the rstd of each row from the same per-lane sums
// of squares and butterfly (over the staged copy), each value (x * rstd) * gain rounded to bf16. The rows are read
// in one sweep whose loads go out together, with each thread's first gain chunk. Every thread of the block calls it.
template <bool kNorm, int kThreads>
__device__ void stage_rows(const __nv_bfloat16* x, const __nv_bfloat16* gain, float eps, int64_t m, int64_t k,
                           uint4* staged) {
  __shared__ float rstd[kSkinnyMaxRows];
  const int64_t chunks = k / kChunk;
  [[maybe_unused]] uint4 own_gain{};
  if constexpr (kNorm) own_gain = __ldg(reinterpret_cast<const uint4*>(gain) + threadIdx.x % chunks);
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < m * chunks; i += kThreads) staged[i] = reinterpret_cast<const uint4*>(x)[i];
  __syncthreads();
  if constexpr (kNorm) {
    const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
    const int64_t own_chunk = threadIdx.x % chunks;
    for (int64_t r = warp; r < m; r += kThreads / kWarp) {
      const float row = row_rstd(reinterpret_cast<const __nv_bfloat16*>(staged + r * chunks), k, eps, lane);
      if (lane == 0) rstd[r] = row;
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < m * chunks; i += kThreads) {
      const int64_t r = i / chunks, c = i % chunks;
      uint4 raw = staged[i];
      float xf[kChunk], gf[kChunk];
      unpack(raw, xf);
      unpack(c == own_chunk ? own_gain : __ldg(reinterpret_cast<const uint4*>(gain) + c), gf);
      __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&raw);
      for (int j = 0; j < kChunk / 2; ++j)
        pairs[j] = __halves2bfloat162(__float2bfloat16_rn((xf[2 * j] * rstd[r]) * gf[2 * j]),
                                      __float2bfloat16_rn((xf[2 * j + 1] * rstd[r]) * gf[2 * j + 1]));
      staged[i] = raw;
    }
    __syncthreads();
  }
}

// x's rows as stage_rows left them in shared memory (normalised there when at all), read as XRows reads its rows.
struct StagedRows {
  const uint4* staged;
  int64_t m, chunks;

  __device__ __forceinline__ void load_gain(int64_t, float (&)[kChunk]) const {}
  __device__ __forceinline__ void load(int r, int64_t c, const float (&)[kChunk], float (&xf)[kChunk]) const {
    unpack(staged[r * chunks + c], xf);
  }
};

// acc[j][r] += x[r, chunk c] . w[j] for kColumns weight rows' chunk c, x an XRows or StagedRows: x's chunk
// (normalised) is read once for all. Each acc[j][r] takes the products in the order a single row's would, so the
// bits depend neither on kColumns nor on where x's rows come from.
template <typename XSource, int kRows, int kColumns>
__device__ __forceinline__ void accumulate_chunk(const XSource& x, const uint4 (&w)[kColumns], int64_t c,
                                                 float (&acc)[kColumns][kRows]) {
  float gf[kChunk];
  x.load_gain(c, gf);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r >= x.m) break;
    float xf[kChunk];
    x.load(r, c, gf, xf);
#pragma unroll
    for (int j = 0; j < kColumns; ++j) {
      float wf[kChunk];
      unpack(w[j], wf);
      for (int i = 0; i < kChunk; ++i) acc[j][r] += wf[i] * xf[i];
    }
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
