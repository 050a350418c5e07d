// CUDA ops over a per-sequence KV cache. Attention of decoded tokens, split across the sequence (flash-decoding):
// one block per (split of cached keys, kv head, row) serves all the query heads that share the kv head
// (GQA), so each cached key and value is read once per step; each warp runs an online softmax over every kWarps-th
// key of the split, kUnroll keys at a time so that their loads overlap, each lane holding a contiguous run of the
// head dimension (one vector load per key); the warps merge in shared memory, and when the cache holds more than one
// split a second kernel merges the splits' partial results, always in split order (deterministic). Head sizes and
// groups outside the grouped kernel's instances (head_dim 64/128/256, up to 8 query heads per kv head) take a
// generic kernel of one block per query head. f32 or bf16 q, cache and out; fp32 softmax and accumulation. The
// cache rows (slots, kv lengths) are read on the device, so a decode step never waits for the host.
#include <cmath>
#include <type_traits>

#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kUnroll = 4;
constexpr int kMaxDimPerLane = 8;  // head_dim up to 256
// Keys per split: a power of two in [kMinKeysPerSplit, kMaxKeysPerSplit], the smallest that gives the step at most
// kBlocksWanted blocks (a few waves of the GPU). A short cache and few rows then get more splits with shorter softmax
// chains: a batch-1 step over a few hundred keys is latency, not bandwidth. It depends on the shapes only (the
// cache's capacity, the kv heads and the rows), so a step's bits do not depend on timing.
constexpr int64_t kMaxKeysPerSplit = 64;
constexpr int64_t kMinKeysPerSplit = 16;
constexpr int64_t kBlocksWanted = 2 * 132;

int64_t keys_per_split_for(int64_t cache_len, int64_t kv_heads, int64_t rows) {
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

// The grouped kernel: kGroup query heads of one kv head, head_dim = kDims * 32 (lane l holds dims
// [l * kDims, (l + 1) * kDims)); cache elements of type T.
template <typename T, int kDims, int kGroup>
__global__ void __launch_bounds__(kWarps * kWarp) attention_kv_cache_grouped_kernel(KvCacheArgs a) {
  constexpr int kD = kDims * kWarp;
  __shared__ float warp_max_score[kWarps][kGroup];
  __shared__ float warp_denominator[kWarps][kGroup];
  __shared__ float warp_acc[kWarps][kGroup][kD];
  let_next_kernel_launch();
  wait_for_previous_kernel();
  const int64_t split = blockIdx.x, kv_head = blockIdx.y, row = blockIdx.z;
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const RowSpan span = row_span(a, row);
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
      q[g][i] = a.q[q_base + i] * a.scale;
      acc[g][i] = 0.0f;
    }
    max_score[g] = -INFINITY;
    denominator[g] = 0.0f;
  }
  const int64_t key_stride = a.hkv * kD;
  const T* k = static_cast<const T*>(a.k.data) + (span.slot * a.cache_len * a.hkv + kv_head) * kD + lane * kDims;
  const T* v = static_cast<const T*>(a.v.data) + (span.slot * a.cache_len * a.hkv + kv_head) * kD + lane * kDims;
  for (int64_t j0 = begin + warp; j0 < end; j0 += kWarps * kUnroll) {
    float keys[kUnroll][kDims], values[kUnroll][kDims];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t j = j0 + u * kWarps;
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
      float score[kUnroll];
      float new_max = max_score[g];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < kDims; ++i) dot += q[g][i] * keys[u][i];
        score[u] = j0 + u * kWarps < end ? warp_sum(dot) : -INFINITY;
        new_max = fmaxf(new_max, score[u]);
      }
      const float rescale = __expf(max_score[g] - new_max);  // new_max is finite: key j0 is in range
      denominator[g] *= rescale;
#pragma unroll
      for (int i = 0; i < kDims; ++i) acc[g][i] *= rescale;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
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
    for (int w = 0; w < kWarps; ++w) total_max = fmaxf(total_max, warp_max_score[w][g]);
    float total_denominator = 0.0f;
    float weights[kWarps];
    for (int w = 0; w < kWarps; ++w) {
      // A warp that saw no key (fewer keys than warps) holds -inf and weighs nothing.
      weights[w] = warp_max_score[w][g] == -INFINITY ? 0.0f : __expf(warp_max_score[w][g] - total_max);
      total_denominator += warp_denominator[w][g] * weights[w];
    }
    float* partial = a.splits == 1 ? nullptr : a.partial + ((row * a.hq + head) * a.splits + split) * (kD + 2);
    for (int dim = threadIdx.x; dim < kD; dim += blockDim.x) {
      float sum = 0.0f;
      for (int w = 0; w < kWarps; ++w) sum += warp_acc[w][g][dim] * weights[w];
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

// Launches the grouped kernel instance for (T, head_dim, group), or returns false when there is none.
template <typename T>
bool launch_grouped(const KvCacheArgs& args, int64_t group) {
  const dim3 grid(static_cast<unsigned>(args.splits), static_cast<unsigned>(args.hkv), static_cast<unsigned>(args.n));
  auto run = [&](auto kernel) {
    launch_overlapped(kernel, grid, dim3(kWarps * kWarp), 0, args);
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
  const int64_t head = blockIdx.x, row = blockIdx.y;
  const RowSpan span = row_span(a, row);
  const int64_t out_base = (row * a.hq + head) * a.d;
  if (!span.valid) {
    for (int64_t dim = threadIdx.x; dim < a.d; dim += blockDim.x) a.out.store(out_base + dim, NAN);
    return;
  }
  const int64_t used = (span.len + a.keys_per_split - 1) / a.keys_per_split;
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
  const int64_t keys_per_split = keys_per_split_for(cache_len, k_cache.dim(2), n);
  const int64_t splits = (cache_len + keys_per_split - 1) / keys_per_split;
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
                   keys_per_split,
                   scale};
  const int64_t group = hq / args.hkv;
  const bool grouped = k_cache.dtype() == DType::BF16 ? launch_grouped<__nv_bfloat16>(args, group)
                                                      : launch_grouped<float>(args, group);
  if (!grouped) {
    launch_overlapped(attention_kv_cache_split_kernel,
                      dim3(static_cast<unsigned>(splits), static_cast<unsigned>(hq), static_cast<unsigned>(n)),
                      dim3(kWarps * kWarp), 0, args);
  }
  if (splits == 1) return;
  launch_overlapped(attention_kv_cache_merge_kernel, dim3(static_cast<unsigned>(hq), static_cast<unsigned>(n)),
                    dim3(kWarps * kWarp), 0, args);
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
