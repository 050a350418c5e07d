// CUDA RMSNorm: one warp per row for y, rstd and dx; the weight gradient is a column sum over all rows, done in two
// fixed-order passes (per chunk of rows, then over the chunks) so it is deterministic without atomics.
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

__device__ __forceinline__ int64_t warp_row() {
  return blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / kWarp;
}

__global__ void forward_rows(ConstFloats x, ConstFloats w, float eps, Floats y, float* rstd, int64_t n, int64_t d) {
  const int64_t row = warp_row();
  if (row >= n) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t base = row * d;
  float sq = 0.0f;
  for (int64_t i = lane; i < d; i += kWarp) {
    const float v = x[base + i];
    sq += v * v;
  }
  sq = warp_sum(sq);
  const float r = static_cast<float>(1.0 / sqrt(static_cast<double>(sq) / static_cast<double>(d) + eps));
  if (lane == 0) rstd[row] = r;
  // HF's order of roundings: (x * rstd) first, then the weight.
  for (int64_t i = lane; i < d; i += kWarp) y.store(base + i, (x[base + i] * r) * w[i]);
}

// dx = r * (w*dy) - r^3 * x * sum(w*dy*x) / D.
__global__ void backward_rows(ConstFloats dy, ConstFloats x, ConstFloats w, const float* rstd, Floats dx, int64_t n,
                              int64_t d) {
  const int64_t row = warp_row();
  if (row >= n) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t base = row * d;
  float dot = 0.0f;
  for (int64_t i = lane; i < d; i += kWarp) dot += w[i] * dy[base + i] * x[base + i];
  dot = warp_sum(dot);
  const float r = rstd[row];
  const double rd = r;
  const float coef = static_cast<float>(rd * rd * rd * static_cast<double>(dot) / static_cast<double>(d));
  for (int64_t i = lane; i < d; i += kWarp) dx.store(base + i, r * (w[i] * dy[base + i]) - coef * x[base + i]);
}

constexpr int kColumns = 32;    // columns per block of the dweight pass (one per lane)
constexpr int kRowLanes = 8;    // rows read at once per block
constexpr int64_t kMaxChunks = 512;

// partial[chunk, c] = sum over the chunk's rows of dy[r, c] * x[r, c] * rstd[r].
__global__ void dweight_partials(ConstFloats dy, ConstFloats x, const float* rstd, int64_t n, int64_t d,
                                 int64_t rows_per_chunk, float* partial) {
  __shared__ float sums[kRowLanes][kColumns];
  const int64_t col = blockIdx.x * static_cast<int64_t>(kColumns) + threadIdx.x;
  const int64_t begin = blockIdx.y * rows_per_chunk;
  const int64_t end = min(n, begin + rows_per_chunk);
  float acc = 0.0f;
  if (col < d)
    for (int64_t r = begin + threadIdx.y; r < end; r += kRowLanes) acc += dy[r * d + col] * x[r * d + col] * rstd[r];
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || col >= d) return;
  float total = 0.0f;
  for (int j = 0; j < kRowLanes; ++j) total += sums[j][threadIdx.x];
  partial[blockIdx.y * d + col] = total;
}

// dweight[c] += sum over chunks of partial[chunk, c], in chunk order.
__global__ void dweight_accumulate(const float* partial, int64_t chunks, int64_t d, Floats dweight) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < d;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double total = 0.0;
    for (int64_t j = 0; j < chunks; ++j) total += partial[j * d + c];
    dweight.store(c, static_cast<float>(static_cast<double>(dweight[c]) + total));
  }
}

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor& rstd) {
  const int64_t n = x.dim(0), d = x.dim(1);
  if (n == 0) return;
  forward_rows<<<row_blocks(n), kWarpsPerBlock * kWarp, 0, cuda_rt::stream()>>>(
      floats_of(x), floats_of(weight), eps, floats_of(y), data_of<float>(rstd), n, d);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                      Tensor& dweight) {
  const int64_t n = x.dim(0), d = x.dim(1);
  if (n == 0 || d == 0) return;
  const cudaStream_t stream = cuda_rt::stream();
  backward_rows<<<row_blocks(n), kWarpsPerBlock * kWarp, 0, stream>>>(
      floats_of(dy), floats_of(x), floats_of(weight), data_of<float>(rstd), floats_of(dx), n, d);
  VEOMNI_CUDA_LAUNCH_CHECK();

  const int64_t chunks = std::min<int64_t>(kMaxChunks, (n + 63) / 64);
  const int64_t rows_per_chunk = (n + chunks - 1) / chunks;
  Tensor partial = Tensor::empty({chunks, d}, DType::F32, x.device());
  const dim3 grid(static_cast<unsigned>((d + kColumns - 1) / kColumns), static_cast<unsigned>(chunks));
  dweight_partials<<<grid, dim3(kColumns, kRowLanes), 0, stream>>>(floats_of(dy), floats_of(x), data_of<float>(rstd),
                                                                   n, d, rows_per_chunk, data_of<float>(partial));
  VEOMNI_CUDA_LAUNCH_CHECK();
  dweight_accumulate<<<grid_for(d, 256), 256, 0, stream>>>(data_of<float>(partial), chunks, d, floats_of(dweight));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
