// CUDA advance of a greedy decode step's tables, one thread per table entry: the chosen ids in, positions, flat
// cache rows and kv lengths up one (kernels/cpu/advance_decode_tables.cc does the same on the host).
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kThreads = 128;

// Entries [0, token_count) of tokens, then [0, 3n) of rows.
__global__ void advance_kernel(const int64_t* chosen, int64_t* tokens, int32_t* rows, int64_t n, int64_t token_count) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < token_count) {
    tokens[i] = i < n ? chosen[i] : tokens[i] + 1;
    return;
  }
  const int64_t j = i - token_count;
  if (j < n || (j >= 2 * n && j < 3 * n)) ++rows[j];  // the flat cache row and the kv length; the slot stays
}

}  // namespace

void advance_decode_tables(const Tensor& chosen, Tensor& tokens, Tensor& rows) {
  const int64_t n = chosen.dim(0), token_count = tokens.dim(0);
  advance_kernel<<<grid_for(token_count + 3 * n, kThreads), kThreads, 0, cuda_rt::stream()>>>(
      data_of<const int64_t>(chosen), data_of<int64_t>(tokens), data_of<int32_t>(rows), n, token_count);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
