// CUDA fused softmax + cross-entropy + gradient, one block per row: an online max/sum pass over the row, then the
// gradient written over it (in place when dlogits is logits). No copy of the logits is made, whatever the vocabulary.
// Rows whose size and alignment allow it move 16 bytes per load.
#include <cmath>

#include "kernels/cuda/index_checks.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/row_fold.cuh"

namespace veomni::ops::cuda {
namespace {

// Running softmax statistics: max and the sum of exp(x - max).
struct MaxSum {
  float max = -INFINITY;
  float sum = 0.0f;
};

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  MaxSum r;
  r.max = fmaxf(a.max, b.max);
  if (r.max == -INFINITY) return r;  // both empty (or all -inf)
  r.sum = (a.max == -INFINITY ? 0.0f : a.sum * expf(a.max - r.max)) +
          (b.max == -INFINITY ? 0.0f : b.sum * expf(b.max - r.max));
  return r;
}

__device__ __forceinline__ MaxSum add(MaxSum a, float x) {
  if (x > a.max) {
    a.sum = (a.max == -INFINITY ? 0.0f : a.sum * expf(a.max - x)) + 1.0f;
    a.max = x;
  } else if (a.max != -INFINITY) {
    a.sum += expf(x - a.max);
  }
  return a;
}

// Combines the whole block's statistics; every thread gets the result.
__device__ MaxSum block_max_sum(MaxSum v) {
  __shared__ MaxSum scratch[kWarp];
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    MaxSum other;
    other.max = __shfl_xor_sync(0xffffffffu, v.max, offset);
    other.sum = __shfl_xor_sync(0xffffffffu, v.sum, offset);
    v = combine(v, other);
  }
  const int lane = threadIdx.x % kWarp;
  if (lane == 0) scratch[threadIdx.x / kWarp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / kWarp) ? scratch[lane] : MaxSum{};
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    MaxSum other;
    other.max = __shfl_xor_sync(0xffffffffu, v.max, offset);
    other.sum = __shfl_xor_sync(0xffffffffu, v.sum, offset);
    v = combine(v, other);
  }
  return v;
}

using packed::as_float;
using packed::rounded;
// kVec consecutive elements moved by one 16-byte load (a 16- or 32-byte store).
template <typename T, int kVec>
using Vec = packed::Pack<T, kVec>;

// Adds kVec values at once: their max first, then one rescale of the running sum and kVec independent
// exponentials, which keeps the exponential unit busy instead of waiting on one long chain.
template <int kVec>
__device__ __forceinline__ MaxSum add_vector(MaxSum acc, const float (&x)[kVec]) {
  float local = x[0];
#pragma unroll
  for (int i = 1; i < kVec; ++i) local = fmaxf(local, x[i]);
  const float m = fmaxf(acc.max, local);
  if (m == -INFINITY) return acc;
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kVec; ++i) s += expf(x[i] - m);
  acc.sum = (acc.max == -INFINITY ? 0.0f : acc.sum * expf(acc.max - m)) + s;
  acc.max = m;
  return acc;
}

// The row's label logit, loss and (when wanted) gradient. Rows whose label is ignored get a zero loss and gradient.
// The label logit is read before the barrier inside block_max_sum, so writing the gradient over the logits is safe.
// Vectorised: vocab is a multiple of kVec and both rows are aligned to a vector (checked by the caller).
template <typename TL, typename TG, int kVec>
__global__ void cross_entropy_vectorised(const TL* logits, const int64_t* labels, int64_t ignore_index,
                                         float grad_scale, float* losses, TG* grad, int64_t vocab) {
  const int64_t row = blockIdx.x;
  const int64_t vectors = vocab / kVec;
  const auto* x = reinterpret_cast<const Vec<TL, kVec>*>(logits + row * vocab);
  auto* g = grad ? reinterpret_cast<Vec<TG, kVec>*>(grad + row * vocab) : nullptr;
  const int64_t label = labels[row];
  if (label == ignore_index) {
    if (threadIdx.x == 0) losses[row] = 0.0f;
    if (g) {
      Vec<TG, kVec> zero;
#pragma unroll
      for (int i = 0; i < kVec; ++i) zero.v[i] = rounded<TG>(0.0f);
      for (int64_t v = threadIdx.x; v < vectors; v += blockDim.x) g[v] = zero;
    }
    return;
  }
  const float label_logit = as_float(logits[row * vocab + label]);
  const MaxSum stats = block_max_sum(packed::fold_two_in_flight<MaxSum>(
      x, vectors, [](MaxSum s, const float(&f)[kVec]) { return add_vector<kVec>(s, f); },
      [](MaxSum p, MaxSum q) { return combine(p, q); }));
  if (threadIdx.x == 0) losses[row] = logf(stats.sum) - (label_logit - stats.max);
  if (!g) return;
  const float inv_sum = 1.0f / stats.sum;
  for (int64_t w = threadIdx.x; w < vectors; w += blockDim.x) {
    const Vec<TL, kVec> in = x[w];
    Vec<TG, kVec> out;
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const float p = expf(as_float(in.v[i]) - stats.max) * inv_sum;
      out.v[i] = rounded<TG>(grad_scale * (w * kVec + i == label ? p - 1.0f : p));
    }
    g[w] = out;
  }
}

// Any vocabulary size and alignment, one element at a time; grad.data is null when no gradient is wanted.
__global__ void cross_entropy_rows(ConstFloats logits, const int64_t* labels, int64_t ignore_index, float grad_scale,
                                   float* losses, Floats grad, int64_t vocab) {
  const int64_t row = blockIdx.x;
  const int64_t base = row * vocab;
  const int64_t label = labels[row];
  if (label == ignore_index) {
    if (threadIdx.x == 0) losses[row] = 0.0f;
    if (grad.data)
      for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) grad.store(base + j, 0.0f);
    return;
  }
  const float label_logit = logits[base + label];
  MaxSum stats;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) stats = add(stats, logits[base + j]);
  stats = block_max_sum(stats);
  if (threadIdx.x == 0) losses[row] = logf(stats.sum) - (label_logit - stats.max);
  if (!grad.data) return;
  const float inv_sum = 1.0f / stats.sum;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    const float p = expf(logits[base + j] - stats.max) * inv_sum;
    grad.store(base + j, grad_scale * (j == label ? p - 1.0f : p));
  }
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Launches the vectorised kernel when the rows allow it; returns false when they do not.
template <typename TL, typename TG>
bool launch_vectorised(const Tensor& logits, const Tensor& labels, int64_t ignore_index, float grad_scale,
                       Tensor& losses, Tensor& dlogits, int threads) {
  constexpr int kVec = 16 / sizeof(TL);
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  TG* grad = dlogits.defined() ? data_of<TG>(dlogits) : nullptr;
  if (vocab % kVec != 0 || !aligned(logits.raw_data(), sizeof(TL) * kVec) ||
      (grad && !aligned(grad, sizeof(TG) * kVec)))
    return false;
  cross_entropy_vectorised<TL, TG, kVec><<<static_cast<unsigned>(rows), threads, 0, cuda_rt::stream()>>>(
      data_of<TL>(logits), data_of<int64_t>(labels), ignore_index, grad_scale, data_of<float>(losses), grad, vocab);
  VEOMNI_CUDA_LAUNCH_CHECK();
  return true;
}

template <typename TL>
bool launch_vectorised_for(const Tensor& logits, const Tensor& labels, int64_t ignore_index, float grad_scale,
                           Tensor& losses, Tensor& dlogits, int threads) {
  if (dlogits.defined() && dlogits.dtype() == DType::F32)
    return launch_vectorised<TL, float>(logits, labels, ignore_index, grad_scale, losses, dlogits, threads);
  return launch_vectorised<TL, __nv_bfloat16>(logits, labels, ignore_index, grad_scale, losses, dlogits, threads);
}

}  // namespace

void cross_entropy(const Tensor& logits, const Tensor& labels, int64_t ignore_index, float grad_scale, Tensor& losses,
                   Tensor& dlogits) {
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  if (rows == 0) return;
  check_ids_in_range("cross_entropy", "labels", labels, vocab,
                     "labels must be token ids of the model's vocabulary (does the data match the model?)",
                     &ignore_index);
  // 512 threads leave room for several blocks per SM (rows in flight) at the registers the kernel needs.
  const int threads = vocab >= 8192 ? 512 : 128;
  const bool vectorised =
      logits.dtype() == DType::BF16
          ? launch_vectorised_for<__nv_bfloat16>(logits, labels, ignore_index, grad_scale, losses, dlogits, threads)
          : launch_vectorised_for<float>(logits, labels, ignore_index, grad_scale, losses, dlogits, threads);
  if (vectorised) return;
  Floats grad{};
  if (dlogits.defined()) grad = floats_of(dlogits);
  cross_entropy_rows<<<static_cast<unsigned>(rows), threads, 0, cuda_rt::stream()>>>(
      floats_of(logits), data_of<int64_t>(labels), ignore_index, grad_scale, data_of<float>(losses), grad, vocab);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
