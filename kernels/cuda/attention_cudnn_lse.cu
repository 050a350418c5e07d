// Transposes attention's log-sum-exp between our [heads, tokens] layout and cuDNN's ragged stats [tokens, heads]
// (cuDNN's plans would otherwise depend on the token count through the head stride).
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kTile = 32;

// dst[c * rows + r] = src[r * cols + c] through a padded shared tile: both sides coalesced.
__global__ void transpose_f32(const float* src, float* dst, int64_t rows, int64_t cols) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t r0 = int64_t{blockIdx.y} * kTile, c0 = int64_t{blockIdx.x} * kTile;
  for (int i = threadIdx.y; i < kTile; i += blockDim.y) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = src[r * cols + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += blockDim.y) {
    const int64_t c = c0 + i, r = r0 + threadIdx.x;
    if (r < rows && c < cols) dst[c * rows + r] = tile[threadIdx.x][i];
  }
}

void transpose(const float* src, float* dst, int64_t rows, int64_t cols) {
  if (rows == 0 || cols == 0) return;
  const int64_t grid_x = (cols + kTile - 1) / kTile, grid_y = (rows + kTile - 1) / kTile;
  VEOMNI_CHECK(grid_x <= INT32_MAX && grid_y <= 65535, "lse transpose: {} x {} is too large", rows, cols);
  transpose_f32<<<dim3(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y)), dim3(kTile, 8), 0,
                  cuda_rt::stream()>>>(src, dst, rows, cols);
  VEOMNI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void lse_heads_to_tokens(const float* heads_major, float* tokens_major, int64_t heads, int64_t tokens) {
  transpose(heads_major, tokens_major, heads, tokens);
}

void lse_tokens_to_heads(const float* tokens_major, float* heads_major, int64_t heads, int64_t tokens) {
  transpose(tokens_major, heads_major, tokens, heads);
}

}  // namespace veomni::ops::cuda
