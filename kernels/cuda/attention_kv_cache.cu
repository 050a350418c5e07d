// CUDA ops over a per-sequence KV cache. Attention of decoded tokens, split across the sequence (flash-decoding):
// one block per (split of kKeysPerSplit cached keys, query head, row); each warp runs an online softmax over every
// kWarps-th key of the split, kUnroll keys at a time so that their loads overlap (lanes split the head dimension);
// the warps merge in shared memory, and when the cache holds more than one split a second kernel merges the splits'
// partial results, always in split order (deterministic). f32 or bf16 q, cache and out; fp32 softmax and
// accumulation. The cache rows (slots, kv lengths) are read on the device, so a decode step never waits for the host.
#include <cmath>

#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kUnroll = 4;
constexpr int kMaxDimPerLane = 8;  // head_dim up to 256
constexpr int64_t kKeysPerSplit = 64;

struct KvCacheArgs {
  ConstFloats q, k, v;
  Floats out;
  float* partial;        // [N, Hq, splits, D + 2]: unnormalized sums, then max score and denominator (splits > 1)
  const int32_t* rows;   // [2, N]: slots, then kv_lens
  int64_t n, hq, hkv, d, batch, cache_len, splits;
  float scale;
};

struct RowSpan {
  int64_t slot, len;
  bool valid;
};

__device__ __forceinline__ RowSpan row_span(const KvCacheArgs& a, int64_t row) {
  const int64_t slot = a.rows[row], len = a.rows[a.n + row];
  return {slot, len, slot >= 0 && slot < a.batch && len >= 1 && len <= a.cache_len};
}

__global__ void attention_kv_cache_split_kernel(KvCacheArgs a) {
  __shared__ float warp_max_score[kWarps];
  __shared__ float warp_denominator[kWarps];
  __shared__ float warp_acc[kWarps][kMaxDimPerLane * kWarp];
  const int64_t split = blockIdx.x, head = blockIdx.y, row = blockIdx.z;
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const int64_t kv_head = head / (a.hq / a.hkv);
  const RowSpan span = row_span(a, row);
  const int64_t begin = split * kKeysPerSplit;
  if (!span.valid) {
    // A row outside the cache: NaN says so (the merge kernel writes it when there are several splits).
    if (a.splits == 1)
      for (int64_t dim = threadIdx.x; dim < a.d; dim += blockDim.x) a.out.store((row * a.hq + head) * a.d + dim, NAN);
    return;
  }
  if (begin >= span.len) return;  // past this row's keys: the merge reads only the splits that hold some
  const int64_t end = min(span.len, begin + kKeysPerSplit);

  float q[kMaxDimPerLane], acc[kMaxDimPerLane];
  for (int i = 0; i < kMaxDimPerLane; ++i) {
    const int64_t dim = lane + i * kWarp;
    q[i] = dim < a.d ? a.q[(row * a.hq + head) * a.d + dim] * a.scale : 0.0f;
    acc[i] = 0.0f;
  }
  float max_score = -INFINITY, denominator = 0.0f;
  for (int64_t j0 = begin + warp; j0 < end; j0 += kWarps * kUnroll) {
    float score[kUnroll];
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t j = j0 + u * kWarps;
      float dot = 0.0f;
      if (j < end) {
        const int64_t base = ((span.slot * a.cache_len + j) * a.hkv + kv_head) * a.d;
        for (int i = 0; i < kMaxDimPerLane; ++i) {
          const int64_t dim = lane + i * kWarp;
          if (dim < a.d) dot += q[i] * a.k[base + dim];
        }
      }
      score[u] = dot;
    }
    float new_max = max_score;
    for (int u = 0; u < kUnroll; ++u) {
      score[u] = j0 + u * kWarps < end ? warp_sum(score[u]) : -INFINITY;
      new_max = fmaxf(new_max, score[u]);
    }
    const float rescale = __expf(max_score - new_max);  // new_max is finite: key j0 is in range
    denominator *= rescale;
    for (int i = 0; i < kMaxDimPerLane; ++i) acc[i] *= rescale;
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t j = j0 + u * kWarps;
      if (j >= end) break;
      const float p = __expf(score[u] - new_max);
      denominator += p;
      const int64_t base = ((span.slot * a.cache_len + j) * a.hkv + kv_head) * a.d;
      for (int i = 0; i < kMaxDimPerLane; ++i) {
        const int64_t dim = lane + i * kWarp;
        if (dim < a.d) acc[i] += p * a.v[base + dim];
      }
    }
    max_score = new_max;
  }
  if (lane == 0) {
    warp_max_score[warp] = max_score;
    warp_denominator[warp] = denominator;
  }
  for (int i = 0; i < kMaxDimPerLane; ++i) warp_acc[warp][lane + i * kWarp] = acc[i];
  __syncthreads();

  float total_max = -INFINITY;
  for (int w = 0; w < kWarps; ++w) total_max = fmaxf(total_max, warp_max_score[w]);
  float total_denominator = 0.0f;
  float weights[kWarps];
  for (int w = 0; w < kWarps; ++w) {
    // A warp that saw no key (fewer keys than warps) holds -inf and weighs nothing.
    weights[w] = warp_max_score[w] == -INFINITY ? 0.0f : __expf(warp_max_score[w] - total_max);
    total_denominator += warp_denominator[w] * weights[w];
  }
  float* partial = a.splits == 1 ? nullptr : a.partial + ((row * a.hq + head) * a.splits + split) * (a.d + 2);
  for (int64_t dim = threadIdx.x; dim < a.d; dim += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) sum += warp_acc[w][dim] * weights[w];
    if (partial == nullptr)
      a.out.store((row * a.hq + head) * a.d + dim, sum / total_denominator);
    else
      partial[dim] = sum;
  }
  if (partial != nullptr && threadIdx.x == 0) {
    partial[a.d] = total_max;
    partial[a.d + 1] = total_denominator;
  }
}

// One block per (query head, row): merges the partial results of the splits that hold the row's keys.
__global__ void attention_kv_cache_merge_kernel(KvCacheArgs a) {
  const int64_t head = blockIdx.x, row = blockIdx.y;
  const RowSpan span = row_span(a, row);
  const int64_t out_base = (row * a.hq + head) * a.d;
  if (!span.valid) {
    for (int64_t dim = threadIdx.x; dim < a.d; dim += blockDim.x) a.out.store(out_base + dim, NAN);
    return;
  }
  const int64_t used = (span.len + kKeysPerSplit - 1) / kKeysPerSplit;
  const float* partial = a.partial + (row * a.hq + head) * a.splits * (a.d + 2);
  float total_max = -INFINITY;
  for (int64_t s = 0; s < used; ++s) total_max = fmaxf(total_max, partial[s * (a.d + 2) + a.d]);
  float total_denominator = 0.0f;
  for (int64_t s = 0; s < used; ++s)
    total_denominator += partial[s * (a.d + 2) + a.d + 1] * __expf(partial[s * (a.d + 2) + a.d] - total_max);
  for (int64_t dim = threadIdx.x; dim < a.d; dim += blockDim.x) {
    float sum = 0.0f;
    for (int64_t s = 0; s < used; ++s)
      sum += partial[s * (a.d + 2) + dim] * __expf(partial[s * (a.d + 2) + a.d] - total_max);
    a.out.store(out_base + dim, sum / total_denominator);
  }
}

// Copies whole cache rows of `width` elements of type T to the flat rows dest names (a row outside is skipped).
template <typename T>
__global__ void kv_cache_write_kernel(const T* rows, const int32_t* dest, T* cache, int64_t s, int64_t width,
                                      int64_t cache_rows) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < s * width;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / width, target = dest[r];
    if (target >= 0 && target < cache_rows) cache[target * width + i % width] = rows[i];
  }
}

}  // namespace

void attention_kv_cache(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& cache_rows,
                        float scale, Tensor& out) {
  const int64_t n = q.dim(0), hq = q.dim(1), d = q.dim(2);
  if (n == 0) return;
  VEOMNI_CHECK(d <= kMaxDimPerLane * kWarp, "attention_kv_cache: head_dim {} is above {}", d, kMaxDimPerLane * kWarp);
  const int64_t cache_len = k_cache.dim(1);
  const int64_t splits = (cache_len + kKeysPerSplit - 1) / kKeysPerSplit;
  Tensor partial;
  if (splits > 1) partial = Tensor::empty({n * hq * splits * (d + 2)}, DType::F32, q.device());
  KvCacheArgs args{floats_of(q),
                   floats_of(k_cache),
                   floats_of(v_cache),
                   floats_of(out),
                   splits > 1 ? data_of<float>(partial) : nullptr,
                   data_of<const int32_t>(cache_rows),
                   n,
                   hq,
                   k_cache.dim(2),
                   d,
                   k_cache.dim(0),
                   cache_len,
                   splits,
                   scale};
  attention_kv_cache_split_kernel<<<dim3(static_cast<unsigned>(splits), static_cast<unsigned>(hq),
                                         static_cast<unsigned>(n)),
                                    kWarps * kWarp, 0, cuda_rt::stream()>>>(args);
  VEOMNI_CUDA_LAUNCH_CHECK();
  if (splits == 1) return;
  attention_kv_cache_merge_kernel<<<dim3(static_cast<unsigned>(hq), static_cast<unsigned>(n)), kWarps * kWarp, 0,
                                    cuda_rt::stream()>>>(args);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void kv_cache_write(const Tensor& rows, const Tensor& dest, Tensor& cache) {
  const int64_t s = rows.dim(0);
  if (s == 0) return;
  const int64_t width = cache.dim(2) * cache.dim(3), cache_rows = cache.dim(0) * cache.dim(1);
  constexpr int kThreads = 256;
  const unsigned blocks = grid_for(s * width, kThreads);
  if (cache.dtype() == DType::BF16)
    kv_cache_write_kernel<<<blocks, kThreads, 0, cuda_rt::stream()>>>(
        data_of<const __nv_bfloat16>(rows), data_of<const int32_t>(dest), data_of<__nv_bfloat16>(cache), s, width,
        cache_rows);
  else
    kv_cache_write_kernel<<<blocks, kThreads, 0, cuda_rt::stream()>>>(
        data_of<const float>(rows), data_of<const int32_t>(dest), data_of<float>(cache), s, width, cache_rows);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
