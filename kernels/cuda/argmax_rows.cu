// CUDA argmax of every row: one block per row; each thread keeps the first index of its greatest value over a strided
// pass, then a shared-memory tree merges (value, index) pairs preferring the greater value, NaN above all, and the
// lower index on a tie (torch.argmax's rule). f32 or bf16 input, i64 ids.
#include <cmath>

#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kThreads = 512;

// Whether (value a, index ia) wins over (value b, index ib).
__device__ __forceinline__ bool better(float a, int64_t ia, float b, int64_t ib) {
  if (isnan(a) || isnan(b)) return isnan(a) && (!isnan(b) || ia < ib);
  return a > b || (a == b && ia < ib);
}

__global__ void argmax_rows_kernel(ConstFloats x, int64_t* ids, int64_t v) {
  __shared__ float best_value[kThreads];
  __shared__ int64_t best_index[kThreads];
  const int64_t row = blockIdx.x;
  float value = -INFINITY;
  int64_t index = -1;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
    const float candidate = x[row * v + j];
    if (index < 0 || better(candidate, j, value, index)) {
      value = candidate;
      index = j;
    }
  }
  best_value[threadIdx.x] = value;
  best_index[threadIdx.x] = index;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) {
      const int other = static_cast<int>(threadIdx.x) + stride;
      const int64_t other_index = best_index[other];
      if (other_index >= 0 &&
          (best_index[threadIdx.x] < 0 ||
           better(best_value[other], other_index, best_value[threadIdx.x], best_index[threadIdx.x]))) {
        best_value[threadIdx.x] = best_value[other];
        best_index[threadIdx.x] = other_index;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) ids[row] = best_index[0];
}

}  // namespace

void argmax_rows(const Tensor& x, Tensor& ids) {
  const int64_t n = x.dim(0);
  if (n == 0) return;
  argmax_rows_kernel<<<static_cast<unsigned>(n), kThreads, 0, cuda_rt::stream()>>>(floats_of(x), data_of<int64_t>(ids),
                                                                                  x.dim(1));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
