// The device side of attention over a KV cache (kernels/cuda/attention_kv_cache.cu): its arguments, the split of the
// cache, and the bodies of the grouped split kernel and of the merge, one block's unit of work each, shared with the
// decode-layer kernel (kernels/cuda/decode_layer.cu) so that both give the same bits.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/kernel_utils.cuh"

namespace veomni::ops::cuda {

inline constexpr int kKvCacheWarps = 4;
inline constexpr int kKvCacheUnroll = 4;
inline constexpr int kKvCacheMaxDimPerLane = 8;  // head_dim up to 256
// Keys per split: a power of two in [kMinKeysPerSplit, kMaxKeysPerSplit], the smallest that gives the step at most
// kBlocksWanted blocks (a few waves of the GPU). A short cache and few rows then get more splits with shorter softmax
// chains: a batch-1 step over a few hundred keys is latency, not bandwidth. It depends on the shapes only (the
// cache's capacity, the kv heads and the rows), so a step's bits do not depend on timing.
inline constexpr int64_t kMaxKeysPerSplit = 64;
inline constexpr int64_t kMinKeysPerSplit = 16;
inline constexpr int64_t kBlocksWanted = 2 * 132;

inline int64_t keys_per_split_for(int64_t cache_len, int64_t kv_heads, int64_t rows) {
  int64_t keys = kMinKeysPerSplit;
  while (keys < kMaxKeysPerSplit && (cache_len + keys - 1) / keys * kv_heads * rows > kBlocksWanted) keys *= 2;
  return keys;
}

struct KvCacheArgs {
  ConstFloats q, k, v;
  Floats out;
  float* partial;        // [N, Hq, splits, D + 2]: unnormalized sums, then max score and denominator (splits > 1)
  const int32_t* rows;   // [2, N]: slots, then kv_lens
  int64_t n, hq, hkv, d, batch, cache_len, splits, keys_per_split;
  float scale;
};

// The kernel arguments of attention_kv_cache's operands (kernels/decode_op_list.h), with the split of the cache for
// its rows; when there are several splits, `partial` receives the buffer of their partial results (kept until the
// kernels have run).
inline KvCacheArgs kv_cache_args(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& cache_rows,
                                 float scale, Tensor& out, Tensor& partial) {
  const int64_t n = q.dim(0), hq = q.dim(1), d = q.dim(2), cache_len = k_cache.dim(1);
  const int64_t keys_per_split = keys_per_split_for(cache_len, k_cache.dim(2), n);
  const int64_t splits = (cache_len + keys_per_split - 1) / keys_per_split;
  if (splits > 1) partial = Tensor::empty({n * hq * splits * (d + 2)}, DType::F32, q.device());
  return KvCacheArgs{floats_of(q),
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
                     keys_per_split,
                     scale};
}

struct RowSpan {
  int64_t slot, len;
  bool valid;
};

__device__ __forceinline__ RowSpan row_span(const KvCacheArgs& a, int64_t row) {
  const int64_t slot = a.rows[row], len = a.rows[a.n + row];
  return {slot, len, slot >= 0 && slot < a.batch && len >= 1 && len <= a.cache_len};
}

// kDims contiguous cache elements of type T as floats (one vector load: 8 or 16 bytes).
template <typename T, int kDims>
__device__ __forceinline__ void load_run(const T* p, float (&out)[kDims]) {
  if constexpr (std::is_same_v<T, float>) {
    static_assert(kDims % 2 == 0, "float runs load in pairs");
    for (int i = 0; i < kDims; i += 2) {
      const float2 v = *reinterpret_cast<const float2*>(p + i);
      out[i] = v.x;
      out[i + 1] = v.y;
    }
  } else {
    static_assert(kDims % 2 == 0, "bf16 runs load in pairs");
    for (int i = 0; i < kDims; i += 2) {
      const __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(p + i);
      out[i] = __low2float(v);
      out[i + 1] = __high2float(v);
    }
  }
}

// The shared memory of one grouped unit: each warp's running maxima, denominators and sums, merged at its end.
template <int kDims, int kGroup>
struct GroupedUnitShared {
  float warp_max_score[kKvCacheWarps][kGroup];
  float warp_denominator[kKvCacheWarps][kGroup];
  float warp_acc[kKvCacheWarps][kGroup][kDims * kWarp];
};

// One block (kKvCacheWarps warps) of the grouped kernel, unit (split, kv_head, row): kGroup query heads of one kv
// head, head_dim = kDims * 32 (lane l holds dims [l * kDims, (l + 1) * kDims)); cache elements of type T. The
// queries are read from a.q, or from q_heads (the kGroup heads' values, [kGroup, head_dim]) when it is given; the
// row's span is read from a.rows, or given (`known`, as row_span reads it).
template <typename T, int kDims, int kGroup>
__device__ __forceinline__ void attention_grouped_unit(const KvCacheArgs& a, int64_t split, int64_t kv_head,
                                                       int64_t row, GroupedUnitShared<kDims, kGroup>& shared,
                                                       const float* q_heads = nullptr,
                                                       const RowSpan* known = nullptr) {
  constexpr int kD = kDims * kWarp;
  auto& warp_max_score = shared.warp_max_score;
  auto& warp_denominator = shared.warp_denominator;
  auto& warp_acc = shared.warp_acc;
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const RowSpan span = known != nullptr ? *known : row_span(a, row);
  const int64_t begin = split * a.keys_per_split;
  if (!span.valid) {
    if (a.splits == 1)
      for (int64_t i = threadIdx.x; i < kGroup * kD; i += blockDim.x)
        a.out.store((row * a.hq + kv_head * kGroup) * kD + i, NAN);
    return;
  }
  if (begin >= span.len) return;
  const int64_t end = min(span.len, begin + a.keys_per_split);

  float q[kGroup][kDims], acc[kGroup][kDims], max_score[kGroup], denominator[kGroup];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    const int64_t q_base = (row * a.hq + kv_head * kGroup + g) * kD + lane * kDims;
#pragma unroll
    for (int i = 0; i < kDims; ++i) {
      q[g][i] = (q_heads != nullptr ? q_heads[g * kD + lane * kDims + i] : a.q[q_base + i]) * a.scale;
      acc[g][i] = 0.0f;
    }
    max_score[g] = -INFINITY;
    denominator[g] = 0.0f;
  }
  const int64_t key_stride = a.hkv * kD;
  const T* k = static_cast<const T*>(a.k.data) + (span.slot * a.cache_len * a.hkv + kv_head) * kD + lane * kDims;
  const T* v = static_cast<const T*>(a.v.data) + (span.slot * a.cache_len * a.hkv + kv_head) * kD + lane * kDims;
  for (int64_t j0 = begin + warp; j0 < end; j0 += kKvCacheWarps * kKvCacheUnroll) {
    float keys[kKvCacheUnroll][kDims], values[kKvCacheUnroll][kDims];
#pragma unroll
    for (int u = 0; u < kKvCacheUnroll; ++u) {
      const int64_t j = j0 + u * kKvCacheWarps;
      if (j < end) {
        load_run<T, kDims>(k + j * key_stride, keys[u]);
        load_run<T, kDims>(v + j * key_stride, values[u]);
      } else {
#pragma unroll
        for (int i = 0; i < kDims; ++i) keys[u][i] = values[u][i] = 0.0f;
      }
    }
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      float score[kKvCacheUnroll];
      float new_max = max_score[g];
#pragma unroll
      for (int u = 0; u < kKvCacheUnroll; ++u) {
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < kDims; ++i) dot += q[g][i] * keys[u][i];
        score[u] = j0 + u * kKvCacheWarps < end ? warp_sum(dot) : -INFINITY;
        new_max = fmaxf(new_max, score[u]);
      }
      const float rescale = __expf(max_score[g] - new_max);  // new_max is finite: key j0 is in range
      denominator[g] *= rescale;
#pragma unroll
      for (int i = 0; i < kDims; ++i) acc[g][i] *= rescale;
#pragma unroll
      for (int u = 0; u < kKvCacheUnroll; ++u) {
        const float p = __expf(score[u] - new_max);  // 0 for a key past the end
        denominator[g] += p;
#pragma unroll
        for (int i = 0; i < kDims; ++i) acc[g][i] += p * values[u][i];
      }
      max_score[g] = new_max;
    }
  }
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    if (lane == 0) {
      warp_max_score[warp][g] = max_score[g];
      warp_denominator[warp][g] = denominator[g];
    }
#pragma unroll
    for (int i = 0; i < kDims; ++i) warp_acc[warp][g][lane * kDims + i] = acc[g][i];
  }
  __syncthreads();

  for (int g = 0; g < kGroup; ++g) {
    const int64_t head = kv_head * kGroup + g;
    float total_max = -INFINITY;
    for (int w = 0; w < kKvCacheWarps; ++w) total_max = fmaxf(total_max, warp_max_score[w][g]);
    float total_denominator = 0.0f;
    float weights[kKvCacheWarps];
    for (int w = 0; w < kKvCacheWarps; ++w) {
      // A warp that saw no key (fewer keys than warps) holds -inf and weighs nothing.
      weights[w] = warp_max_score[w][g] == -INFINITY ? 0.0f : __expf(warp_max_score[w][g] - total_max);
      total_denominator += warp_denominator[w][g] * weights[w];
    }
    float* partial = a.splits == 1 ? nullptr : a.partial + ((row * a.hq + head) * a.splits + split) * (kD + 2);
    for (int dim = threadIdx.x; dim < kD; dim += blockDim.x) {
      float sum = 0.0f;
      for (int w = 0; w < kKvCacheWarps; ++w) sum += warp_acc[w][g][dim] * weights[w];
      if (partial == nullptr)
        a.out.store((row * a.hq + head) * kD + dim, sum / total_denominator);
      else
        partial[dim] = sum;
    }
    if (partial != nullptr && threadIdx.x == 0) {
      partial[kD] = total_max;
      partial[kD + 1] = total_denominator;
    }
  }
}

// The merge's shared memory (more splits than kMergeRegisterSplits): the weights and denominators of up to a block's
// worth of splits at a time, and each warp's greatest split maximum.
inline constexpr int kMergeThreads = kKvCacheWarps * kWarp;
inline constexpr int kMergeRegisterSplits = 16;
struct MergeShared {
  float weight[kMergeThreads];
  float denominator[kMergeThreads];
  float warp_max_score[kKvCacheWarps];
};

// Dimension dim of one (head, row)'s merged output from the partial results of used <= kMergeRegisterSplits splits
// (`partial` at its first split): every load goes out at once, then the merge's folds (the greatest maximum, the
// denominator, the weighted sum) run in ascending split order with the merge's expressions.
__device__ __forceinline__ float merged_dimension(const float* partial, int64_t used, int64_t stride, int64_t d,
                                                  int64_t dim) {
  float max_score[kMergeRegisterSplits], denominator[kMergeRegisterSplits], value[kMergeRegisterSplits];
#pragma unroll
  for (int s = 0; s < kMergeRegisterSplits; ++s) {
    if (s >= used) break;
    max_score[s] = partial[s * stride + d];
    denominator[s] = partial[s * stride + d + 1];
    value[s] = partial[s * stride + dim];
  }
  float total_max = -INFINITY;
#pragma unroll
  for (int s = 0; s < kMergeRegisterSplits; ++s) {
    if (s >= used) break;
    total_max = fmaxf(total_max, max_score[s]);
  }
  float total_denominator = 0.0f, sum = 0.0f;
#pragma unroll
  for (int s = 0; s < kMergeRegisterSplits; ++s) {
    if (s >= used) break;
    const float weight = __expf(max_score[s] - total_max);
    total_denominator += denominator[s] * weight;
    sum += value[s] * weight;
  }
  return sum / total_denominator;
}

// One (head, row) merged by a block of kMergeThreads threads when there are more splits than registers hold: the
// splits' maxima and denominators are read by one thread each, all at once, and each split's weight computed once;
// the folds then run in ascending split order with the same expressions, so the bits are those of merged_dimension.
__device__ __forceinline__ void merge_many_splits(const KvCacheArgs& a, const float* partial, int64_t used,
                                                  int64_t out_base, MergeShared& shared) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const int64_t stride = a.d + 2;
  constexpr int kDimsPerThread = kKvCacheMaxDimPerLane * kWarp / kMergeThreads;  // head_dim up to 256
  float local_max = -INFINITY;  // fmaxf skips NaN and is exact: any order gives the fold's value
  for (int64_t s = threadIdx.x; s < used; s += kMergeThreads) local_max = fmaxf(local_max, partial[s * stride + a.d]);
  local_max = warp_max(local_max);
  if (lane == 0) shared.warp_max_score[warp] = local_max;
  __syncthreads();
  float total_max = -INFINITY;
  for (int w = 0; w < kKvCacheWarps; ++w) total_max = fmaxf(total_max, shared.warp_max_score[w]);
  float total_denominator = 0.0f;
  float sum[kDimsPerThread] = {};
  for (int64_t first = 0; first < used; first += kMergeThreads) {
    const int64_t count = min(used - first, static_cast<int64_t>(kMergeThreads));
    if (threadIdx.x < count) {
      const float* split = partial + (first + threadIdx.x) * stride;
      shared.weight[threadIdx.x] = __expf(split[a.d] - total_max);
      shared.denominator[threadIdx.x] = split[a.d + 1];
    }
    __syncthreads();
    for (int64_t i = 0; i < count; ++i) total_denominator += shared.denominator[i] * shared.weight[i];
#pragma unroll
    for (int j = 0; j < kDimsPerThread; ++j) {
      const int64_t dim = threadIdx.x + j * kMergeThreads;
      if (dim >= a.d) break;
      const float* column = partial + first * stride + dim;
#pragma unroll 8
      for (int64_t i = 0; i < count; ++i) sum[j] += column[i * stride] * shared.weight[i];
    }
    __syncthreads();  // the weights are rewritten by the next splits
  }
#pragma unroll
  for (int j = 0; j < kDimsPerThread; ++j) {
    const int64_t dim = threadIdx.x + j * kMergeThreads;
    if (dim < a.d) a.out.store(out_base + dim, sum[j] / total_denominator);
  }
}

// One block of kMergeThreads threads, unit (query heads [first_head, first_head + heads), row): merges the partial
// results of the splits that hold the row's keys, a split after another in the merge's order; NaN for a row outside
// the cache. The row's span as attention_grouped_unit takes it.
__device__ __forceinline__ void attention_merge_heads(const KvCacheArgs& a, int64_t first_head, int64_t heads,
                                                      int64_t row, MergeShared& shared,
                                                      const RowSpan* known = nullptr) {
  const RowSpan span = known != nullptr ? *known : row_span(a, row);
  const int64_t out_base = (row * a.hq + first_head) * a.d, stride = a.d + 2;
  if (!span.valid) {
    for (int64_t i = threadIdx.x; i < heads * a.d; i += kMergeThreads) a.out.store(out_base + i, NAN);
    return;
  }
  const int64_t used = (span.len + a.keys_per_split - 1) / a.keys_per_split;
  const float* partial = a.partial + (row * a.hq + first_head) * a.splits * stride;
  if (used > kMergeRegisterSplits) {
    for (int64_t h = 0; h < heads; ++h)
      merge_many_splits(a, partial + h * a.splits * stride, used, out_base + h * a.d, shared);
    return;
  }
  for (int64_t i = threadIdx.x; i < heads * a.d; i += kMergeThreads) {
    const int64_t h = i / a.d, dim = i % a.d;
    a.out.store(out_base + i, merged_dimension(partial + h * a.splits * stride, used, stride, a.d, dim));
  }
}

}  // namespace veomni::ops::cuda
