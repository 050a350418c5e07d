// CUDA FP8 quantization: rowwise (bf16 rows of a multiple of 8 elements: one warp per row moving 16 bytes per load;
// otherwise one block per row: the row's amax, then its E4M3 bytes) and columnwise into the transpose (column amaxes
// by atomic max over row chunks, then a 32x32 tiled transpose). The scale and the value
// divided by it are IEEE f32 divisions and the E4M3 rounding is the hardware's (round to nearest even, satfinite),
// so the bytes equal the CPU reference's.
#include <cuda_fp8.h>

#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/fp8_ops.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kRowThreads = 256;
constexpr int kTile = 32;       // the transpose's tile edge
constexpr int kTileRows = 8;    // threads per tile column: each moves kTile / kTileRows elements
constexpr int kAmaxRows = 256;  // rows per block of the column amax

__device__ __forceinline__ float scale_for(float amax) { return amax > 0.0f ? __fdiv_rn(amax, kFp8E4M3Max) : 1.0f; }

__device__ __forceinline__ uint8_t to_e4m3(float value, float scale) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fdiv_rn(value, scale), __NV_SATFINITE, __NV_E4M3));
}

__global__ void quantize_rows_kernel(ConstFloats x, int64_t cols, uint8_t* q, float* scales) {
  __shared__ float scratch[kWarp];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols;
  float amax = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) amax = fmaxf(amax, fabsf(x[base + c]));
  amax = warp_max(amax);
  if (threadIdx.x % kWarp == 0) scratch[threadIdx.x / kWarp] = amax;
  __syncthreads();
  const unsigned lane = threadIdx.x % kWarp;
  amax = lane < blockDim.x / kWarp ? scratch[lane] : 0.0f;
  amax = warp_max(amax);  // every warp reduces the same partials, so every thread holds the row's amax
  const float scale = scale_for(amax);
  if (threadIdx.x == 0) scales[blockIdx.x] = scale;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) q[base + c] = to_e4m3(x[base + c], scale);
}

// The same for bf16 rows of 8k elements (16-byte aligned): one warp per row, eight elements per load and store. The
// row is read twice (amax, then the bytes); the second pass mostly hits L1. The maximum is exact in any order, so the
// bytes are those of the kernel above.
constexpr int kRowsPerBlock = 8;  // warps per block, one row each
using Bf16x8 = packed::Pack<__nv_bfloat16, 8>;
using Bytes8 = packed::Pack<uint8_t, 8>;

__global__ void quantize_bf16_rows_kernel(const __nv_bfloat16* x, int64_t rows, int64_t cols, uint8_t* q,
                                          float* scales) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= rows) return;  // whole warps leave together: warp_max below has every lane of a live row
  const unsigned lane = threadIdx.x % kWarp;
  const int64_t packs = cols / 8;
  const Bf16x8* src = reinterpret_cast<const Bf16x8*>(x + row * cols);
  float amax = 0.0f;
  for (int64_t p = lane; p < packs; p += kWarp) {
    const Bf16x8 v = src[p];
#pragma unroll
    for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(__bfloat162float(v.v[j])));
  }
  const float scale = scale_for(warp_max(amax));
  if (lane == 0) scales[row] = scale;
  Bytes8* dst = reinterpret_cast<Bytes8*>(q + row * cols);
  for (int64_t p = lane; p < packs; p += kWarp) {
    const Bf16x8 v = src[p];
    Bytes8 out;
#pragma unroll
    for (int j = 0; j < 8; ++j) out.v[j] = to_e4m3(__bfloat162float(v.v[j]), scale);
    dst[p] = out;
  }
}

// amax_bits[c] = max over its rows of |x[r, c]| as the bits of a non-negative float (which order as integers), so
// that the blocks of a column meet through atomicMax; the result does not depend on their order.
__global__ void column_amax_kernel(ConstFloats x, int64_t rows, int64_t cols, int* amax_bits) {
  __shared__ float partial[kTileRows][kTile];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * kAmaxRows;
  const int64_t last = min(first + kAmaxRows, rows);
  float amax = 0.0f;
  if (c < cols)
    for (int64_t r = first + threadIdx.y; r < last; r += kTileRows) amax = fmaxf(amax, fabsf(x[r * cols + c]));
  partial[threadIdx.y][threadIdx.x] = amax;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
  for (int i = 1; i < kTileRows; ++i) amax = fmaxf(amax, partial[i][threadIdx.x]);
  atomicMax(amax_bits + c, __float_as_int(amax));
}

__global__ void scales_from_amax_kernel(float* scales, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    scales[i] = scale_for(scales[i]);
}

// qt[c, r] = e4m3(x[r, c] / scales[c]) through a shared tile, so that both the reads and the writes are coalesced.
__global__ void quantize_transposed_kernel(ConstFloats x, int64_t rows, int64_t cols, const float* scales,
                                           uint8_t* qt) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile, c0 = static_cast<int64_t>(blockIdx.x) * kTile;
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    tile[i][threadIdx.x] = r < rows && c < cols ? x[r * cols + c] : 0.0f;
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int64_t c = c0 + i, r = r0 + threadIdx.x;
    if (c < cols && r < rows) qt[c * rows + r] = to_e4m3(tile[threadIdx.x][i], scales[c]);
  }
}

unsigned blocks_of(int64_t n, int64_t per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }

}  // namespace

void quantize_fp8_rows(const Tensor& x, Tensor& q, Tensor& scales) {
  const int64_t rows = x.dim(0), cols = x.dim(1);
  if (rows == 0) return;
  const auto aligned = [](const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; };
  if (x.dtype() == DType::BF16 && cols % 8 == 0 && aligned(x.raw_data(), 16) && aligned(q.raw_data(), 8)) {
    quantize_bf16_rows_kernel<<<blocks_of(rows, kRowsPerBlock), kRowsPerBlock * kWarp, 0, cuda_rt::stream()>>>(
        data_of<const __nv_bfloat16>(x), rows, cols, data_of<uint8_t>(q), data_of<float>(scales));
    VEOMNI_CUDA_LAUNCH_CHECK();
    return;
  }
  quantize_rows_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, cuda_rt::stream()>>>(
      floats_of(x), cols, data_of<uint8_t>(q), data_of<float>(scales));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void quantize_fp8_cols_transposed(const Tensor& x, Tensor& qt, Tensor& scales) {
  const int64_t rows = x.dim(0), cols = x.dim(1);
  if (cols == 0) return;
  float* s = data_of<float>(scales);
  VEOMNI_CUDA_CHECK(cudaMemsetAsync(s, 0, static_cast<size_t>(cols) * sizeof(float), cuda_rt::stream()));
  const dim3 threads(kTile, kTileRows);
  if (rows > 0) {
    column_amax_kernel<<<dim3(blocks_of(cols, kTile), blocks_of(rows, kAmaxRows)), threads, 0, cuda_rt::stream()>>>(
        floats_of(x), rows, cols, reinterpret_cast<int*>(s));
    VEOMNI_CUDA_LAUNCH_CHECK();
  }
  scales_from_amax_kernel<<<grid_for(cols, 256), 256, 0, cuda_rt::stream()>>>(s, cols);
  VEOMNI_CUDA_LAUNCH_CHECK();
  if (rows == 0) return;
  quantize_transposed_kernel<<<dim3(blocks_of(cols, kTile), blocks_of(rows, kTile)), threads, 0,
                               cuda_rt::stream()>>>(floats_of(x), rows, cols, s, data_of<uint8_t>(qt));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
