// CUDA label log-probabilities and softmax entropy, one block per row: a single online pass keeps the row's max, the
// sum of exp(x - max) and the sum of exp(x - max) * (x - max), from which the log-prob and the entropy follow; the
// backward makes the same pass and then writes the gradient over the row (in place when dlogits is logits). Rows whose
// size and alignment allow it move 16 bytes per load; others take the same kernels one element at a time.
#include <cmath>

#include "kernels/cuda/index_checks.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/row_fold.cuh"

namespace veomni::ops::cuda {
namespace {

// Running statistics of a row, relative to its max m: sum = sum exp(x - m), moment = sum exp(x - m) * (x - m).
struct RowStats {
  float max = -INFINITY;
  float sum = 0.0f;
  float moment = 0.0f;
};

// a's statistics re-expressed relative to a larger max m: exp(x - m) = exp(x - a.max) * f, x - m = (x - a.max) + d.
__device__ __forceinline__ void rebase(RowStats& a, float m) {
  if (a.max == -INFINITY) {
    a = RowStats{m, 0.0f, 0.0f};
    return;
  }
  const float d = a.max - m;
  const float f = expf(d);
  a.moment = f * (a.moment + d * a.sum);
  a.sum *= f;
  a.max = m;
}

__device__ __forceinline__ RowStats combine(RowStats a, RowStats b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return a;  // both empty (or all -inf)
  rebase(a, m);
  rebase(b, m);
  return RowStats{m, a.sum + b.sum, a.moment + b.moment};
}

// Adds kVec values: their max first, one rebase of the running statistics, then kVec independent exponentials.
template <int kVec>
__device__ __forceinline__ RowStats add_values(RowStats acc, const float (&x)[kVec]) {
  float local = x[0];
#pragma unroll
  for (int i = 1; i < kVec; ++i) local = fmaxf(local, x[i]);
  const float m = fmaxf(acc.max, local);
  if (m == -INFINITY) return acc;
  rebase(acc, m);
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const float s = x[i] - m;
    const float e = expf(s);
    acc.sum += e;
    if (e > 0.0f) acc.moment += e * s;  // a -inf logit adds nothing (0 * -inf would be NaN)
  }
  return acc;
}

__device__ __forceinline__ RowStats shuffle_combine(RowStats v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    RowStats other;
    other.max = __shfl_xor_sync(0xffffffffu, v.max, offset);
    other.sum = __shfl_xor_sync(0xffffffffu, v.sum, offset);
    other.moment = __shfl_xor_sync(0xffffffffu, v.moment, offset);
    v = combine(v, other);
  }
  return v;
}

// Combines the whole block's statistics; every thread gets the result. Its barrier also means every thread has
// finished reading the row, so the gradient may then be written over it.
__device__ RowStats block_stats(RowStats v) {
  __shared__ RowStats scratch[kWarp];
  v = shuffle_combine(v);
  const int lane = threadIdx.x % kWarp;
  if (lane == 0) scratch[threadIdx.x / kWarp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / kWarp) ? scratch[lane] : RowStats{};
  return shuffle_combine(v);
}

using packed::as_float;
using packed::rounded;
using packed::with_float_type;
template <typename T, int kVec>
using Vec = packed::Pack<T, kVec>;

// The row's statistics, two vectors in flight per thread.
template <typename TL, int kVec>
__device__ RowStats row_stats(const Vec<TL, kVec>* x, int64_t vectors) {
  return block_stats(packed::fold_two_in_flight<RowStats>(
      x, vectors, [](RowStats s, const float(&f)[kVec]) { return add_values<kVec>(s, f); },
      [](RowStats p, RowStats q) { return combine(p, q); }));
}

// log p[label] = (x[label] - max) - log(sum); H = log(sum) - moment / sum. Ignored rows give 0 and 0.
template <typename TL, int kVec>
__global__ void token_logprobs_kernel(const TL* logits, const int64_t* labels, int64_t ignore_index, float* logprobs,
                                      float* entropy, int64_t vocab) {
  const int64_t row = blockIdx.x;
  const int64_t label = labels[row];
  if (label == ignore_index) {
    if (threadIdx.x == 0) {
      logprobs[row] = 0.0f;
      if (entropy) entropy[row] = 0.0f;
    }
    return;
  }
  const auto* x = reinterpret_cast<const Vec<TL, kVec>*>(logits + row * vocab);
  const RowStats stats = row_stats<TL, kVec>(x, vocab / kVec);
  if (threadIdx.x != 0) return;
  const float log_sum = logf(stats.sum);
  logprobs[row] = (as_float(logits[row * vocab + label]) - stats.max) - log_sum;
  if (entropy) entropy[row] = log_sum - stats.moment / stats.sum;
}

// dlogits = dlogprobs * (onehot - p) + dentropy * (-p * (log p + H)), written over the row when in place.
template <typename TL, typename TG, int kVec>
__global__ void token_logprobs_backward_kernel(const TL* logits, const int64_t* labels, int64_t ignore_index,
                                               const float* dlogprobs, const float* dentropy, TG* grad, int64_t vocab) {
  const int64_t row = blockIdx.x;
  const int64_t vectors = vocab / kVec;
  auto* g = reinterpret_cast<Vec<TG, kVec>*>(grad + row * vocab);
  const int64_t label = labels[row];
  if (label == ignore_index) {
    Vec<TG, kVec> zero;
#pragma unroll
    for (int i = 0; i < kVec; ++i) zero.v[i] = rounded<TG>(0.0f);
    for (int64_t v = threadIdx.x; v < vectors; v += blockDim.x) g[v] = zero;
    return;
  }
  const auto* x = reinterpret_cast<const Vec<TL, kVec>*>(logits + row * vocab);
  const RowStats stats = row_stats<TL, kVec>(x, vectors);
  const float log_sum = logf(stats.sum);
  const float inv_sum = 1.0f / stats.sum;
  const float g_lp = dlogprobs[row];
  const float g_ent = dentropy ? dentropy[row] : 0.0f;
  const float h = log_sum - stats.moment * inv_sum;
  for (int64_t w = threadIdx.x; w < vectors; w += blockDim.x) {
    const Vec<TL, kVec> in = x[w];
    Vec<TG, kVec> out;
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const float s = as_float(in.v[i]) - stats.max;
      const float p = expf(s) * inv_sum;
      float d = g_lp * ((w * kVec + i == label ? 1.0f : 0.0f) - p);
      if (g_ent != 0.0f && p > 0.0f) d -= g_ent * p * ((s - log_sum) + h);
      out.v[i] = rounded<TG>(d);
    }
    g[w] = out;
  }
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// 512 threads leave room for several blocks per SM (rows in flight) at the registers the kernels need.
int threads_for(int64_t vocab) { return vocab >= 8192 ? 512 : 128; }

// 16-byte loads when the vocabulary is a multiple of the vector and every row starts on one; else one element.
template <typename TL, typename TG>
bool vectorisable(const Tensor& logits, const void* grad) {
  constexpr int kVec = 16 / sizeof(TL);
  return logits.dim(1) % kVec == 0 && aligned(logits.raw_data(), sizeof(TL) * kVec) &&
         (grad == nullptr || aligned(grad, sizeof(TG) * kVec));
}

template <typename TL>
void launch_forward(const Tensor& logits, const Tensor& labels, int64_t ignore_index, Tensor& logprobs,
                    Tensor& entropy) {
  constexpr int kVec = 16 / sizeof(TL);
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  float* ent = entropy.defined() ? data_of<float>(entropy) : nullptr;
  const auto kernel =
      vectorisable<TL, TL>(logits, nullptr) ? token_logprobs_kernel<TL, kVec> : token_logprobs_kernel<TL, 1>;
  kernel<<<static_cast<unsigned>(rows), threads_for(vocab), 0, cuda_rt::stream()>>>(
      data_of<TL>(logits), data_of<int64_t>(labels), ignore_index, data_of<float>(logprobs), ent, vocab);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

template <typename TL, typename TG>
void launch_backward(const Tensor& logits, const Tensor& labels, int64_t ignore_index, const Tensor& dlogprobs,
                     const Tensor& dentropy, Tensor& dlogits) {
  constexpr int kVec = 16 / sizeof(TL);
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  const float* dent = dentropy.defined() ? data_of<float>(dentropy) : nullptr;
  TG* grad = data_of<TG>(dlogits);
  const auto kernel = vectorisable<TL, TG>(logits, grad) ? token_logprobs_backward_kernel<TL, TG, kVec>
                                                         : token_logprobs_backward_kernel<TL, TG, 1>;
  kernel<<<static_cast<unsigned>(rows), threads_for(vocab), 0, cuda_rt::stream()>>>(
      data_of<TL>(logits), data_of<int64_t>(labels), ignore_index, data_of<float>(dlogprobs), dent, grad, vocab);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

constexpr const char* kLabelHint =
    "labels must be token ids of the model's vocabulary (does the data match the model?)";

}  // namespace

void token_logprobs(const Tensor& logits, const Tensor& labels, int64_t ignore_index, Tensor& logprobs,
                    Tensor& entropy) {
  if (logits.dim(0) == 0) return;
  check_ids_in_range("token_logprobs", "labels", labels, logits.dim(1), kLabelHint, &ignore_index);
  with_float_type(logits.dtype(),
                  [&](auto tl) { launch_forward<decltype(tl)>(logits, labels, ignore_index, logprobs, entropy); });
}

void token_logprobs_backward(const Tensor& logits, const Tensor& labels, int64_t ignore_index, const Tensor& dlogprobs,
                             const Tensor& dentropy, Tensor& dlogits) {
  if (logits.dim(0) == 0) return;
  check_ids_in_range("token_logprobs_backward", "labels", labels, logits.dim(1), kLabelHint, &ignore_index);
  with_float_type(logits.dtype(), [&](auto tl) {
    with_float_type(dlogits.dtype(), [&](auto tg) {
      launch_backward<decltype(tl), decltype(tg)>(logits, labels, ignore_index, dlogprobs, dentropy, dlogits);
    });
  });
}

}  // namespace veomni::ops::cuda
