// CUDA ops over a per-sequence KV cache. Attention of decoded tokens, split across the sequence (flash-decoding):
// one block per (split of cached keys, kv head, row) serves all the query heads that share the kv head
// (GQA), so each cached key and value is read once per step; each warp runs an online softmax over every
// kKvCacheWarps-th key of the split, kKvCacheUnroll keys at a time so that their loads overlap, each lane holding a contiguous run of the
// head dimension (one vector load per key); the warps merge in shared memory, and when the cache holds more than one
// split a second kernel merges the splits' partial results, always in split order (deterministic). Head sizes and
// groups outside the grouped kernel's instances (head_dim 64/128/256, up to 8 query heads per kv head) take a
// generic kernel of one block per query head. f32 or bf16 q, cache and out; fp32 softmax and accumulation. The
// cache rows (slots, kv lengths) are read on the device, so a decode step never waits for the host.
#include <cmath>
#include <type_traits>

#include "kernels/cuda/attention_kv_cache.cuh"
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {
namespace {

__global__ void attention_kv_cache_split_kernel(KvCacheArgs a) {
  __shared__ float warp_max_score[kKvCacheWarps];
  __shared__ float warp_denominator[kKvCacheWarps];
  __shared__ float warp_acc[kKvCacheWarps][kKvCacheMaxDimPerLane * kWarp];
  let_next_kernel_launch();
  wait_for_previous_kernel();
  const int64_t split = blockIdx.x, head = blockIdx.y, row = blockIdx.z;
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const int64_t kv_head = head / (a.hq / a.hkv);
  const RowSpan span = row_span(a, row);
  const int64_t begin = split * a.keys_per_split;
  if (!span.valid) {
    // A row outside the cache: NaN says so (the merge kernel writes it when there are several splits).
    if (a.splits == 1)
      for (int64_t dim = threadIdx.x; dim < a.d; dim += blockDim.x) a.out.store((row * a.hq + head) * a.d + dim, NAN);
    return;
  }
  if (begin >= span.len) return;  // past this row's keys: the merge reads only the splits that hold some
  const int64_t end = min(span.len, begin + a.keys_per_split);

  float q[kKvCacheMaxDimPerLane], acc[kKvCacheMaxDimPerLane];
  for (int i = 0; i < kKvCacheMaxDimPerLane; ++i) {
    const int64_t dim = lane + i * kWarp;
    q[i] = dim < a.d ? a.q[(row * a.hq + head) * a.d + dim] * a.scale : 0.0f;
    acc[i] = 0.0f;
  }
  float max_score = -INFINITY, denominator = 0.0f;
  for (int64_t j0 = begin + warp; j0 < end; j0 += kKvCacheWarps * kKvCacheUnroll) {
    float score[kKvCacheUnroll];
    for (int u = 0; u < kKvCacheUnroll; ++u) {
      const int64_t j = j0 + u * kKvCacheWarps;
      float dot = 0.0f;
      if (j < end) {
        const int64_t base = ((span.slot * a.cache_len + j) * a.hkv + kv_head) * a.d;
        for (int i = 0; i < kKvCacheMaxDimPerLane; ++i) {
          const int64_t dim = lane + i * kWarp;
          if (dim < a.d) dot += q[i] * a.k[base + dim];
        }
      }
      score[u] = dot;
    }
    float new_max = max_score;
    for (int u = 0; u < kKvCacheUnroll; ++u) {
      score[u] = j0 + u * kKvCacheWarps < end ? warp_sum(score[u]) : -INFINITY;
      new_max = fmaxf(new_max, score[u]);
    }
    const float rescale = __expf(max_score - new_max);  // new_max is finite: key j0 is in range
    denominator *= rescale;
    for (int i = 0; i < kKvCacheMaxDimPerLane; ++i) acc[i] *= rescale;
    for (int u = 0; u < kKvCacheUnroll; ++u) {
      const int64_t j = j0 + u * kKvCacheWarps;
      if (j >= end) break;
      const float p = __expf(score[u] - new_max);
      denominator += p;
      const int64_t base = ((span.slot * a.cache_len + j) * a.hkv + kv_head) * a.d;
      for (int i = 0; i < kKvCacheMaxDimPerLane; ++i) {
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
  for (int i = 0; i < kKvCacheMaxDimPerLane; ++i) warp_acc[warp][lane + i * kWarp] = acc[i];
  __syncthreads();

  float total_max = -INFINITY;
  for (int w = 0; w < kKvCacheWarps; ++w) total_max = fmaxf(total_max, warp_max_score[w]);
  float total_denominator = 0.0f;
  float weights[kKvCacheWarps];
  for (int w = 0; w < kKvCacheWarps; ++w) {
    // A warp that saw no key (fewer keys than warps) holds -inf and weighs nothing.
    weights[w] = warp_max_score[w] == -INFINITY ? 0.0f : __expf(warp_max_score[w] - total_max);
    total_denominator += warp_denominator[w] * weights[w];
  }
  float* partial = a.splits == 1 ? nullptr : a.partial + ((row * a.hq + head) * a.splits + split) * (a.d + 2);
  for (int64_t dim = threadIdx.x; dim < a.d; dim += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < kKvCacheWarps; ++w) sum += warp_acc[w][dim] * weights[w];
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

template <typename T, int kDims, int kGroup>
__global__ void __launch_bounds__(kKvCacheWarps* kWarp) attention_kv_cache_grouped_kernel(KvCacheArgs a) {
  let_next_kernel_launch();
  wait_for_previous_kernel();
  __shared__ GroupedUnitShared<kDims, kGroup> shared;
  attention_grouped_unit<T, kDims, kGroup>(a, blockIdx.x, blockIdx.y, blockIdx.z, shared);
}

// Launches the grouped kernel instance for (T, head_dim, group), or returns false when there is none.
template <typename T>
bool launch_grouped(const KvCacheArgs& args, int64_t group) {
  const dim3 grid(static_cast<unsigned>(args.splits), static_cast<unsigned>(args.hkv), static_cast<unsigned>(args.n));
  auto run = [&](auto kernel) {
    launch_overlapped(kernel, grid, dim3(kKvCacheWarps * kWarp), 0, args);
    return true;
  };
  auto by_group = [&](auto dims) {
    constexpr int kDims = decltype(dims)::value;
    switch (group) {
      case 1: return run(attention_kv_cache_grouped_kernel<T, kDims, 1>);
      case 2: return run(attention_kv_cache_grouped_kernel<T, kDims, 2>);
      case 4: return run(attention_kv_cache_grouped_kernel<T, kDims, 4>);
      case 8:
        // Eight heads of 256 would hold too many registers: those take the generic kernel.
        if constexpr (kDims <= 4) return run(attention_kv_cache_grouped_kernel<T, kDims, 8>);
        return false;
      default: return false;
    }
  };
  switch (args.d) {
    case 64: return by_group(std::integral_constant<int, 2>{});
    case 128: return by_group(std::integral_constant<int, 4>{});
    case 256: return by_group(std::integral_constant<int, 8>{});
    default: return false;
  }
}

// One block per (query head, row): merges the partial results of the splits that hold the row's keys.
__global__ void attention_kv_cache_merge_kernel(KvCacheArgs a) {
  let_next_kernel_launch();
  wait_for_previous_kernel();
  __shared__ MergeShared shared;
  attention_merge_heads(a, blockIdx.x, 1, blockIdx.y, shared);
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
  VEOMNI_CHECK(d <= kKvCacheMaxDimPerLane * kWarp, "attention_kv_cache: head_dim {} is above {}", d,
               kKvCacheMaxDimPerLane * kWarp);
  Tensor partial;
  const KvCacheArgs args = kv_cache_args(q, k_cache, v_cache, cache_rows, scale, out, partial);
  const int64_t group = hq / args.hkv;
  const bool grouped = k_cache.dtype() == DType::BF16 ? launch_grouped<__nv_bfloat16>(args, group)
                                                      : launch_grouped<float>(args, group);
  if (!grouped) {
    launch_overlapped(attention_kv_cache_split_kernel,
                      dim3(static_cast<unsigned>(args.splits), static_cast<unsigned>(hq), static_cast<unsigned>(n)),
                      dim3(kKvCacheWarps * kWarp), 0, args);
  }
  if (args.splits == 1) return;
  launch_overlapped(attention_kv_cache_merge_kernel, dim3(static_cast<unsigned>(hq), static_cast<unsigned>(n)),
                    dim3(kMergeThreads), 0, args);
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
