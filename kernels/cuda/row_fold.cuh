// Folding a row of packed vectors into running statistics, two vectors in flight per thread (the softmax
// reductions of cross_entropy.cu and token_logprobs.cu).
#pragma once
#include "kernels/cuda/kernel_utils.cuh"

namespace veomni::ops::cuda::packed {

// Folds this thread's share of a row of packed vectors (x[threadIdx.x], x[threadIdx.x + blockDim.x], ...) into
// running statistics with add(stats, values as floats), two vectors in flight (two independent chains, merged with
// merge at the end) so that the loads of the next pair overlap the arithmetic of this one.
template <typename Stats, typename T, int P, typename Add, typename Merge>
__device__ __forceinline__ Stats fold_two_in_flight(const Pack<T, P>* x, int64_t vectors, Add add, Merge merge) {
  Stats a, b;
  int64_t v = threadIdx.x;
  for (; v + blockDim.x < vectors; v += 2 * blockDim.x) {
    const Pack<T, P> va = x[v], vb = x[v + blockDim.x];
    float fa[P], fb[P];
#pragma unroll
    for (int i = 0; i < P; ++i) {
      fa[i] = as_float(va.v[i]);
      fb[i] = as_float(vb.v[i]);
    }
    a = add(a, fa);
    b = add(b, fb);
  }
  if (v < vectors) {
    const Pack<T, P> va = x[v];
    float fa[P];
#pragma unroll
    for (int i = 0; i < P; ++i) fa[i] = as_float(va.v[i]);
    a = add(a, fa);
  }
  return merge(a, b);
}

}  // namespace veomni::ops::cuda::packed
