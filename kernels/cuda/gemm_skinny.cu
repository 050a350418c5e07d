// The skinny GEMM of decoding: out [M, N] = x [M, K] W[N, K]^T in bf16 for M <= kSkinnyMaxRows. One warp per output
// column: the lanes read W's row in 16-byte chunks (8 bf16), each chunk once, and the matching chunks of every row of
// x (tiny, cached), accumulating in fp32; a warp sum per row, in a fixed order (deterministic).
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

__global__ void skinny_matmul_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out, int64_t m,
                                     int64_t n, int64_t k) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t column = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (column >= n) return;
  float acc[kSkinnyMaxRows] = {};
  const uint4* w_row = reinterpret_cast<const uint4*>(w + column * k);
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
  for (int r = 0; r < kSkinnyMaxRows; ++r) {
    if (r >= m) break;
    const float sum = warp_sum(acc[r]);
    if (lane == 0) out[r * n + column] = __float2bfloat16_rn(sum);
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

}  // namespace

bool skinny_matmul_applies(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& out,
                           float alpha, float beta) {
  if (trans_a || !trans_b || alpha != 1.0f || beta != 0.0f) return false;
  if (a.dtype() != DType::BF16 || b.dtype() != DType::BF16 || out.dtype() != DType::BF16) return false;
  const int64_t m = a.dim(0), k = a.dim(1);
  if (m < 1 || m > kSkinnyMaxRows || k % kChunk != 0 || k == 0) return false;
  return aligned16(a) && aligned16(b) && skinny_enabled();
}

void skinny_matmul(const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(0);
  const unsigned blocks = static_cast<unsigned>((n + kWarpsPerBlock - 1) / kWarpsPerBlock);
  skinny_matmul_kernel<<<blocks, kWarpsPerBlock * kWarp, 0, cuda_rt::stream()>>>(
      data_of<const __nv_bfloat16>(a), data_of<const __nv_bfloat16>(b), data_of<__nv_bfloat16>(out), m, n, k);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
