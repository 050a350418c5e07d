// The skinny GEMM of decoding: out [M, N] = x [M, K] W[N, K]^T in bf16 for M <= kSkinnyMaxRows. One warp per output
// column: the lanes read W's row in 16-byte chunks (8 bf16), each chunk once, and the matching chunks of every row of
// x (tiny, cached), accumulating in fp32; a warp sum per row, in a fixed order (deterministic). Two epilogues ride on
// the same loop: adding the product to out (beta 1: a residual add) and SwiGLU over a fused [gate; up] weight.
#include "kernels/cuda/gemm_skinny.h"

#include <cstdlib>
#include <cstring>

#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kChunk = 8;  // bf16 per 16-byte load

__device__ __forceinline__ void unpack(const uint4& raw, float (&out)[kChunk]) {
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
  for (int i = 0; i < kChunk / 2; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// acc[r] += the lane's share of x[r, :] . w_row (the lane's chunks, in ascending order).
__device__ __forceinline__ void dot_rows(const __nv_bfloat16* x, const uint4* w_row, int64_t m, int64_t k, int lane,
                                         float (&acc)[kSkinnyMaxRows]) {
  const int64_t chunks = k / kChunk;
#pragma unroll 4
  for (int64_t c = lane; c < chunks; c += kWarp) {
    float wf[kChunk];
    unpack(__ldg(w_row + c), wf);
    for (int r = 0; r < kSkinnyMaxRows; ++r) {
      if (r >= m) break;
      float xf[kChunk];
      unpack(__ldg(reinterpret_cast<const uint4*>(x + r * k) + c), xf);
      for (int i = 0; i < kChunk; ++i) acc[r] += wf[i] * xf[i];
    }
  }
}

// out[r, column] = x[r] . W[column] (+ out[r, column] when kAccumulate: one rounding of the fp32 sum).
template <bool kAccumulate>
__global__ void skinny_matmul_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out, int64_t m,
                                     int64_t n, int64_t k) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t column = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (column >= n) return;
  float acc[kSkinnyMaxRows] = {};
  dot_rows(x, reinterpret_cast<const uint4*>(w + column * k), m, k, lane, acc);
  for (int r = 0; r < kSkinnyMaxRows; ++r) {
    if (r >= m) break;
    float sum = warp_sum(acc[r]);
    if (lane != 0) continue;
    if constexpr (kAccumulate) sum += __bfloat162float(out[r * n + column]);
    out[r * n + column] = __float2bfloat16_rn(sum);
  }
}

// out[r, j] = silu(g) * u with g = x[r] . W[j] and u = x[r] . W[I + j], each rounded to bf16 first: the bits of the
// skinny GEMM into gate_up followed by swiglu_fused_forward (kernels/cuda/swiglu.cu's fp32 math).
__global__ void skinny_swiglu_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out, int64_t m,
                                     int64_t intermediate, int64_t k) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t column = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (column >= intermediate) return;
  float gate[kSkinnyMaxRows] = {};
  float up[kSkinnyMaxRows] = {};
  dot_rows(x, reinterpret_cast<const uint4*>(w + column * k), m, k, lane, gate);
  dot_rows(x, reinterpret_cast<const uint4*>(w + (intermediate + column) * k), m, k, lane, up);
  for (int r = 0; r < kSkinnyMaxRows; ++r) {
    if (r >= m) break;
    const float g = __bfloat162float(__float2bfloat16_rn(warp_sum(gate[r])));
    const float u = __bfloat162float(__float2bfloat16_rn(warp_sum(up[r])));
    if (lane == 0) out[r * intermediate + column] = __float2bfloat16_rn(g * (1.0f / (1.0f + expf(-g))) * u);
  }
}

bool aligned16(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0; }

bool skinny_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("VEOMNI_SKINNY_GEMM");
    return value == nullptr || std::strcmp(value, "0") != 0;
  }();
  return enabled;
}

// x [M, K] and a row-major weight of K columns, all bf16, that the kernels take.
bool skinny_operands(const Tensor& x, const Tensor& w, const Tensor& out) {
  if (x.dtype() != DType::BF16 || w.dtype() != DType::BF16 || out.dtype() != DType::BF16) return false;
  const int64_t m = x.dim(0), k = x.dim(1);
  if (m < 1 || m > kSkinnyMaxRows || k % kChunk != 0 || k == 0) return false;
  return aligned16(x) && aligned16(w) && skinny_enabled();
}

unsigned blocks_for(int64_t columns) { return static_cast<unsigned>((columns + kWarpsPerBlock - 1) / kWarpsPerBlock); }

}  // namespace

bool skinny_matmul_applies(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& out,
                           float alpha, float beta) {
  if (trans_a || !trans_b || alpha != 1.0f || (beta != 0.0f && beta != 1.0f)) return false;
  return skinny_operands(a, b, out);
}

void skinny_matmul(const Tensor& a, const Tensor& b, Tensor& out, bool accumulate) {
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(0);
  const auto kernel = accumulate ? skinny_matmul_kernel<true> : skinny_matmul_kernel<false>;
  kernel<<<blocks_for(n), kWarpsPerBlock * kWarp, 0, cuda_rt::stream()>>>(
      data_of<const __nv_bfloat16>(a), data_of<const __nv_bfloat16>(b), data_of<__nv_bfloat16>(out), m, n, k);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

bool skinny_swiglu_applies(const Tensor& x, const Tensor& gate_up, const Tensor& out) {
  return skinny_operands(x, gate_up, out) && aligned16(out);
}

void skinny_swiglu(const Tensor& x, const Tensor& gate_up, Tensor& out) {
  const int64_t m = x.dim(0), k = x.dim(1), intermediate = gate_up.dim(0) / 2;
  skinny_swiglu_kernel<<<blocks_for(intermediate), kWarpsPerBlock * kWarp, 0, cuda_rt::stream()>>>(
      data_of<const __nv_bfloat16>(x), data_of<const __nv_bfloat16>(gate_up), data_of<__nv_bfloat16>(out), m,
      intermediate, k);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
