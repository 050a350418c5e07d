// CUDA embedding: row gathers forward. The backward is deterministic without atomics: (id, token) pairs are radix
// sorted by id (stable, so tokens stay in order), and the block at the start of each run of equal ids owns that table
// row, summing its tokens' gradients in token order before adding them in.
#include <cub/device/device_radix_sort.cuh>

#include <bit>

#include "kernels/cuda/index_checks.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace veomni::ops::cuda {
namespace {

constexpr const char* kIdsHint = "token ids must be below the model's vocab_size (was the data tokenized for it?)";
constexpr int kThreads = 256;

__global__ void gather_rows(const int64_t* ids, ConstFloats table, Floats out, int64_t n, int64_t hidden) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n * hidden;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = idx / hidden;
    const int64_t col = idx % hidden;
    out.store(idx, table[ids[row] * hidden + col]);
  }
}

__global__ void sort_inputs(const int64_t* ids, int64_t n, uint32_t* keys, int32_t* tokens) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    keys[i] = static_cast<uint32_t>(ids[i]);
    tokens[i] = static_cast<int32_t>(i);
  }
}

// Block p owns the run of equal ids that starts at sorted position p (and does nothing when p is inside a run).
__global__ void scatter_runs(const uint32_t* keys, const int32_t* tokens, int64_t n, ConstFloats dout, Floats dtable,
                             int64_t hidden) {
  const int64_t p = blockIdx.x;
  const uint32_t id = keys[p];
  if (p > 0 && keys[p - 1] == id) return;
  int64_t end = p + 1;
  while (end < n && keys[end] == id) ++end;
  const int64_t row = static_cast<int64_t>(id) * hidden;
  for (int64_t col = threadIdx.x; col < hidden; col += blockDim.x) {
    float acc = 0.0f;
    for (int64_t q = p; q < end; ++q) acc += dout[static_cast<int64_t>(tokens[q]) * hidden + col];
    dtable.store(row + col, dtable[row + col] + acc);
  }
}

}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out) {
  check_ids_in_range("embedding_forward", "ids", ids, table.dim(0), kIdsHint);
  const int64_t n = ids.numel(), hidden = table.dim(1);
  if (n * hidden == 0) return;
  gather_rows<<<grid_for(n * hidden, kThreads), kThreads, 0, cuda_rt::stream()>>>(
      data_of<int64_t>(ids), floats_of(table), floats_of(out), n, hidden);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable) {
  const int64_t vocab = dtable.dim(0);
  check_ids_in_range("embedding_backward", "ids", ids, vocab, kIdsHint);
  const int64_t n = ids.numel(), hidden = dtable.dim(1);
  if (n == 0 || hidden == 0) return;
  VEOMNI_CHECK(n <= INT32_MAX && vocab <= UINT32_MAX, "embedding_backward: {} ids into {} rows overflow 32-bit keys", n,
               vocab);
  const Device device = ids.device();
  const cudaStream_t stream = cuda_rt::stream();
  // Keys and tokens, unsorted then sorted, in one buffer of 4-byte elements.
  Tensor buffer = Tensor::empty({4, n}, DType::I32, device);
  auto* keys_in = data_of<uint32_t>(buffer);
  auto* keys_out = keys_in + n;
  auto* tokens_in = data_of<int32_t>(buffer) + 2 * n;
  auto* tokens_out = tokens_in + n;
  sort_inputs<<<grid_for(n, kThreads), kThreads, 0, stream>>>(data_of<int64_t>(ids), n, keys_in, tokens_in);
  VEOMNI_CUDA_LAUNCH_CHECK();

  const int end_bit = std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(vocab - 1))));
  const int items = static_cast<int>(n);
  size_t temp_bytes = 0;
  VEOMNI_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in, keys_out, tokens_in, tokens_out,
                                                    items, 0, end_bit, stream));
  Tensor temp = Tensor::empty({static_cast<int64_t>(std::max<size_t>(temp_bytes, 1))}, DType::U8, device);
  VEOMNI_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.raw_data(), temp_bytes, keys_in, keys_out, tokens_in,
                                                    tokens_out, items, 0, end_bit, stream));

  scatter_runs<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(keys_out, tokens_out, n, floats_of(dout),
                                                                  floats_of(dtable), hidden);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
