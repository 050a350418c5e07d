// A run of dense decoder layers' decode step as one persistent kernel (ops::dense_decode_layers on CUDA). Op by op,
// a layer's step of a few rows is seven short kernels whose launches, ramps and tails cost more than their memory
// traffic; here one grid of blocks that are all resident at once runs every layer's phases with grid barriers between
// them, five a layer:
//   q/k/v GEMM (the input norm inside) | attention (the q/k norms, RoPE and cache writes inside; the last split of a
//   row and kv head to finish merges the splits) | o_proj into h | gate|up SwiGLU (the post-attention norm inside) |
//   down_proj into h | the next layer ...
// Every block's slices of the weights stream into its shared memory through the copy engine (cp.async.bulk): each
// buffer takes its next slice, of this layer or of the next one, as soon as the block has read the one before, so the
// weight stream runs on across the short dependent phases, the barriers and the layer boundaries. Each phase runs the
// device code of the op it replaces (skinny_dot.cuh, qkv_norm_rope.cuh, attention_kv_cache.cuh) on the same units of
// work, so the results are those ops' bits.
// Opt-in (VEOMNI_DECODE_LAYER_KERNEL=1, decode_layer.h): on an H100 it decodes the Qwen3-0.6B shape at batch 1 as
// fast as the ops in turn launched early, not faster; bench/RESULTS.md has the figures and where a layer's 38 us go.
#include "kernels/cuda/decode_layer.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>

#include "kernels/cuda/attention_kv_cache.cuh"
#include "kernels/cuda/bulk_copy.cuh"
#include "kernels/cuda/decode_layer_run.cuh"
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/gemm_skinny.h"
#include "kernels/cuda/grid_barrier.cuh"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/qkv_norm_rope.cuh"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/skinny_dot.cuh"

namespace veomni::ops::cuda {
namespace {

// Four warps a block: the attention phase's block size.
constexpr int kLayerWarps = kKvCacheWarps;
constexpr int kLayerThreads = kLayerWarps * kWarp;
constexpr int kMaxLayersPerLaunch = 32;  // a longer run takes several launches
constexpr int kMaxKvHeads = 64;
constexpr int kMergeCounts = kSkinnyMaxRows * kMaxKvHeads;  // one arrival counter per (row, kv head)

// Columns [begin, end) of n that a block owns in a GEMM phase (the blocks' shares differ by one column at most).
struct Slice {
  int64_t begin, end;
};

__host__ __device__ inline Slice slice_of(int64_t n, int64_t block, int64_t blocks) {
  return {n * block / blocks, n * (block + 1) / blocks};
}

struct LayersArgs {
  __nv_bfloat16* h;  // [m, hidden], updated in place
  __nv_bfloat16* qkv;  // [m, qkv_columns]: the q/k/v GEMM's output
  __nv_bfloat16* attention_out;  // [m, hq * d]
  __nv_bfloat16* act;  // [m, intermediate]
  float* partial;  // the attention splits' partial results (splits > 1)
  unsigned* merge_counts;  // [m, hkv] arrivals of the splits, zero between layers
  unsigned* barrier;  // the grid barrier's counter (grid_barrier.cuh)
  const float* cos;
  const float* sin;
  const int32_t* write_rows;  // [m] flat cache rows of the step's keys and values
  const int32_t* cache_rows;  // [2, m] slots, then kv lengths
  int64_t m, hidden, qkv_columns, attention_width, intermediate;
  int64_t hq, hkv, d, batch, cache_len, splits, keys_per_split;
  int layers;
  int buffer_of[kWeightKinds];  // the shared-memory buffer each kind of slice streams into
  uint32_t buffer_offset[kWeightKinds];  // each buffer's offset in dynamic shared memory
  uint32_t scratch_offset;  // the GEMM phases' staged input rows, or the attention phase's scratch
  DecodeLayerPointers layer[kMaxLayersPerLaunch];
};
static_assert(sizeof(LayersArgs) <= 4096, "a launch's arguments fit the classic 4 KB parameter space");

// The shape of a kind of weight: n output columns of k inputs; gate|up holds n gate rows, then n up rows.
struct WeightShape {
  int64_t n, k;
  bool gate_up;
};

__device__ __forceinline__ WeightShape shape_of(const LayersArgs& a, int kind) {
  switch (kind) {
    case kQkv: return {a.qkv_columns, a.hidden, false};
    case kOProj: return {a.hidden, a.attention_width, false};
    case kGateUp: return {a.intermediate, a.hidden, true};
    default: return {a.hidden, a.intermediate, false};
  }
}

// The weight stream: one buffer of shared memory per entry of buffer_of, each with an mbarrier whose phases count its
// slices. Item t = layer * kWeightKinds + kind; a buffer's items are those of the kinds it holds, in that order.
struct WeightStream {
  const LayersArgs& a;
  unsigned char* shared;
  uint64_t* loaded;

  // Queues (one thread) this block's slice of item (layer, kind) into its buffer: the slice's rows and, for gate|up,
  // the up rows n rows further, after them.
  __device__ void queue(int layer, int kind) const {
    const int buffer = a.buffer_of[kind];
    const WeightShape w = shape_of(a, kind);
    const Slice s = slice_of(w.n, blockIdx.x, gridDim.x);
    const uint32_t bytes = static_cast<uint32_t>((s.end - s.begin) * w.k * sizeof(__nv_bfloat16));
    mbarrier_expect_bytes(&loaded[buffer], w.gate_up ? 2 * bytes : bytes);
    if (bytes == 0) return;
    unsigned char* dst = shared + a.buffer_offset[buffer];
    const __nv_bfloat16* src = a.layer[layer].weight[kind];
    bulk_copy_to_shared(dst, src + s.begin * w.k, bytes, &loaded[buffer]);
    if (w.gate_up) bulk_copy_to_shared(dst + bytes, src + (w.n + s.begin) * w.k, bytes, &loaded[buffer]);
  }

  // Queues (one thread) the first item of every buffer but the q/k/v one, whose first item is queued first.
  __device__ void queue_first_items_after_qkv() const {
    for (int kind = kOProj; kind < kWeightKinds; ++kind) {
      bool first = a.buffer_of[kind] != a.buffer_of[kQkv];
      for (int before = kOProj; before < kind; ++before) first = first && a.buffer_of[before] != a.buffer_of[kind];
      if (first) queue(0, kind);
    }
  }

  // Queues (one thread) the item after (layer, kind) in its buffer, once the block has read (layer, kind).
  __device__ void queue_next(int layer, int kind) const {
    for (int t = layer * kWeightKinds + kind + 1; t < a.layers * kWeightKinds; ++t)
      if (a.buffer_of[t % kWeightKinds] == a.buffer_of[kind]) return queue(t / kWeightKinds, t % kWeightKinds);
  }

  // Waits until item (layer, kind) has landed; returns its rows in shared memory.
  __device__ const uint4* wait(int layer, int kind) const {
    const int buffer = a.buffer_of[kind];
    int per_layer = 0, before = 0;
    for (int k = 0; k < kWeightKinds; ++k) {
      if (a.buffer_of[k] != buffer) continue;
      ++per_layer;
      if (k < kind) ++before;
    }
    mbarrier_wait(&loaded[buffer], static_cast<uint32_t>(layer * per_layer + before) & 1u);
    return reinterpret_cast<const uint4*>(shared + a.buffer_offset[buffer]);
  }
};

// acc[j][r] += the lane's share of staged row r . weight row w_rows[j], for the first `count` of kWeights rows (all
// in shared memory): the skinny kernel's chunk order and arithmetic for each row (accumulate_chunk), so its bits;
// several rows at once so that their loads and multiply-adds overlap. kRows: the most rows (m <= kRows), 1 for the
// batch-1 step's short code.
template <int kRows, int kWeights>
__device__ __forceinline__ void dot_staged(const uint4* staged, int64_t m, int64_t chunks,
                                           const uint4* const (&w_rows)[kWeights], int count, int lane,
                                           float (&acc)[kWeights][kRows]) {
#pragma unroll 2
  for (int64_t c = lane; c < chunks; c += kWarp) {
    float wf[kWeights][kChunk];
#pragma unroll
    for (int j = 0; j < kWeights; ++j)
      if (j < count) unpack(w_rows[j][c], wf[j]);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r >= m) break;
      float xf[kChunk];
      unpack(staged[r * chunks + c], xf);
#pragma unroll
      for (int j = 0; j < kWeights; ++j)
        if (j < count)
          for (int i = 0; i < kChunk; ++i) acc[j][r] += wf[j][i] * xf[i];
    }
  }
}

constexpr int kColumnsAtOnce = 4;  // a warp's columns in flight in a GEMM phase (two in the SwiGLU phase)

// out[r, column] (+)= x[r] . W[column] for the block's columns, W's rows and x's staged rows in shared memory:
// skinny_matmul's bits. Warp w takes the block's columns w, w + 4, ..., kColumnsAtOnce of them at a time.
template <bool kAccumulate, int kRows>
__device__ void gemm_phase(const uint4* staged, int64_t m, int64_t k, const uint4* rows, int64_t n,
                           __nv_bfloat16* out) {
  const Slice s = slice_of(n, blockIdx.x, gridDim.x);
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const int64_t chunks = k / kChunk;
  for (int64_t first = s.begin + warp; first < s.end; first += kLayerWarps * kColumnsAtOnce) {
    const int count = static_cast<int>(
        min(static_cast<int64_t>(kColumnsAtOnce), (s.end - first + kLayerWarps - 1) / kLayerWarps));
    const uint4* w_rows[kColumnsAtOnce];
    for (int j = 0; j < kColumnsAtOnce; ++j) w_rows[j] = rows + (first + j * kLayerWarps - s.begin) * chunks;
    float acc[kColumnsAtOnce][kRows] = {};
    dot_staged<kRows>(staged, m, chunks, w_rows, count, lane, acc);
#pragma unroll
    for (int j = 0; j < kColumnsAtOnce; ++j) {
      if (j >= count) break;
      for (int r = 0; r < kRows; ++r) {
        if (r >= m) break;
        const float sum = warp_sum(acc[j][r]);
        if (lane != 0) continue;
        __nv_bfloat16& o = out[r * n + first + j * kLayerWarps];
        o = column_result(sum, kAccumulate, kAccumulate ? o : __nv_bfloat16());
      }
    }
  }
}

// out[r, j] = SwiGLU of staged x[r] against gate row j and up row j (after the block's gate rows in shared memory):
// skinny_swiglu's bits. Warp w takes the block's columns w, w + 4, ..., two at a time (four weight rows).
template <int kRows>
__device__ void swiglu_phase(const uint4* staged, int64_t m, int64_t k, const uint4* rows, int64_t n,
                             __nv_bfloat16* out) {
  constexpr int kAtOnce = kColumnsAtOnce / 2;
  const Slice s = slice_of(n, blockIdx.x, gridDim.x);
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const int64_t chunks = k / kChunk, columns = s.end - s.begin;
  for (int64_t first = s.begin + warp; first < s.end; first += kLayerWarps * kAtOnce) {
    const int count =
        static_cast<int>(min(static_cast<int64_t>(kAtOnce), (s.end - first + kLayerWarps - 1) / kLayerWarps));
    const uint4* w_rows[2 * kAtOnce];  // gate j, up j, ...
    for (int j = 0; j < kAtOnce; ++j) {
      const int64_t row = first + j * kLayerWarps - s.begin;
      w_rows[2 * j] = rows + row * chunks;
      w_rows[2 * j + 1] = rows + (columns + row) * chunks;
    }
    float acc[2 * kAtOnce][kRows] = {};
    dot_staged<kRows>(staged, m, chunks, w_rows, 2 * count, lane, acc);
#pragma unroll
    for (int j = 0; j < kAtOnce; ++j) {
      if (j >= count) break;
      for (int r = 0; r < kRows; ++r) {
        if (r >= m) break;
        const __nv_bfloat16 act = swiglu_result(warp_sum(acc[2 * j][r]), warp_sum(acc[2 * j + 1][r]));
        if (lane == 0) out[r * n + first + j * kLayerWarps] = act;
      }
    }
  }
}

// The step's rows as the attention phase reads them, loaded once a launch into shared memory: the cache rows the
// step's keys and values go to, and each row's span of the cache (the inputs of the step, which no layer writes).
struct StepRows {
  int64_t dest[kSkinnyMaxRows];
  RowSpan span[kSkinnyMaxRows];
};

__device__ void load_step_rows(const LayersArgs& a, StepRows& step) {
  if (threadIdx.x < a.m) {
    KvCacheArgs rows{};
    rows.rows = a.cache_rows;
    rows.n = a.m;
    rows.batch = a.batch;
    rows.cache_len = a.cache_len;
    step.dest[threadIdx.x] = a.write_rows[threadIdx.x];
    step.span[threadIdx.x] = row_span(rows, threadIdx.x);
  }
  __syncthreads();
}

// The attention phase's shared memory, in the scratch area: the grouped unit's, the unit's query heads and each
// warp's head scratch for the q/k norms.
template <int kDims, int kGroup>
struct AttentionScratch {
  GroupedUnitShared<kDims, kGroup> unit;
  MergeShared merge;
  float q[kGroup][kDims * kWarp];
  float head[kLayerWarps][kDims * kWarp];
  unsigned merges;  // whether this block merges the splits of its (row, kv head)
};

// qkv_norm_rope_cache_write's arguments for a layer (only the caches are written here).
__device__ __forceinline__ QkvNormRopeArgs rope_args(const LayersArgs& a, const DecodeLayerPointers& l) {
  QkvNormRopeArgs r{};
  r.qkv = ConstFloats{a.qkv, true};
  r.q_norm = ConstFloats{l.q_norm, true};
  r.k_norm = ConstFloats{l.k_norm, true};
  r.cos = a.cos;
  r.sin = a.sin;
  r.dest = a.write_rows;
  r.k_cache = Floats{l.k_cache, true};
  r.v_cache = Floats{l.v_cache, true};
  r.hq = a.hq;
  r.hkv = a.hkv;
  r.d = a.d;
  r.cache_rows = a.batch * a.cache_len;
  r.eps = l.qk_eps;
  return r;
}

// attention_kv_cache's arguments for a layer (its queries come from the unit's shared memory).
__device__ __forceinline__ KvCacheArgs attention_args(const LayersArgs& a, const DecodeLayerPointers& l) {
  KvCacheArgs k{};
  k.k = ConstFloats{l.k_cache, true};
  k.v = ConstFloats{l.v_cache, true};
  k.out = Floats{a.attention_out, true};
  k.partial = a.partial;
  k.rows = a.cache_rows;
  k.n = a.m;
  k.hq = a.hq;
  k.hkv = a.hkv;
  k.d = a.d;
  k.batch = a.batch;
  k.cache_len = a.cache_len;
  k.splits = a.splits;
  k.keys_per_split = a.keys_per_split;
  k.scale = l.scale;
  return k;
}

// Attention unit (split, kv head g, row), the work of three ops' units: (1) the step's keys and values that this unit
// reads (and those whose write falls to it: the unit of the writing row whose split holds the write's position) go
// into the caches, normalised and rotated as qkv_norm_rope_cache_write does; no other unit reads them, and a unit that
// reads one writes it itself first. (2) The group's query heads of the row, normalised, rotated and rounded to bf16
// as q holds them, into shared memory; the grouped unit over the split. (3) With several splits, the last split of
// (row, g) to finish merges them, as the merge kernel does.
template <int kDims, int kGroup>
__device__ void attention_unit(const KvCacheArgs& att, const QkvNormRopeArgs& rope, const StepRows& step,
                               int64_t split, int64_t g, int64_t row, AttentionScratch<kDims, kGroup>& s,
                               unsigned* merge_counts) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const RowSpan span = step.span[row];
  const int64_t begin = split * att.keys_per_split;
  const bool attends = span.valid && begin < span.len;
  const int64_t end = attends ? min(span.len, begin + att.keys_per_split) : begin;
  for (int64_t job = warp; job < 2 * att.n; job += kLayerWarps) {
    const int64_t token = job / 2, target = step.dest[token];
    if (target < 0 || target >= rope.cache_rows) continue;  // outside the caches: not written
    const int64_t position = target % att.cache_len;
    const bool falls_here = token == row && position / att.keys_per_split == split;
    const bool read_here = target / att.cache_len == span.slot && position >= begin && position < end;
    if (!falls_here && !read_here) continue;
    const bool value = job % 2 == 1;
    const Floats cache = value ? rope.v_cache : rope.k_cache;
    qkv_head_values<kDims * kWarp>(rope, token, (value ? rope.hq + rope.hkv : rope.hq) + g, s.head[warp], lane,
                                   [&](int64_t i, float x) { cache.store((target * rope.hkv + g) * rope.d + i, x); });
    __syncwarp();  // the warp's head scratch is rewritten by its next job
  }
  if (attends) {
    // The query heads go to the warps from the last one down: the first ones take the keys and values above.
    for (int q = kLayerWarps - 1 - warp; q < kGroup; q += kLayerWarps) {
      qkv_head_values<kDims * kWarp>(rope, row, g * kGroup + q, s.head[warp], lane,
                                     [&](int64_t i, float x) { s.q[q][i] = __bfloat162float(__float2bfloat16_rn(x)); });
      __syncwarp();
    }
  }
  __syncthreads();  // the cache rows and query heads above are read by every warp below
  attention_grouped_unit<__nv_bfloat16, kDims, kGroup>(att, split, g, row, s.unit, &s.q[0][0], &span);
  if (att.splits == 1) return;
  bool merges = !span.valid && split == 0;  // a row outside the cache: its merge writes NaN
  if (attends) {
    __syncthreads();  // every thread's partial sums are written
    if (threadIdx.x == 0) {
      const int64_t used = (span.len + att.keys_per_split - 1) / att.keys_per_split;
      unsigned* count = merge_counts + row * att.hkv + g;
      fence_acq_rel();  // the block's partial sums before its arrival
      const bool last = atomicAdd(count, 1u) == static_cast<unsigned>(used - 1);
      if (last) {
        atomicExch(count, 0u);  // for the next layer, whose units come after grid barriers
        fence_acq_rel();  // the other splits' partial sums before this block's reads
      }
      s.merges = last ? 1u : 0u;
    }
    __syncthreads();
    merges = s.merges != 0;
  }
  if (merges) attention_merge_heads(att, g * kGroup, kGroup, row, s.merge, &span);
}

template <int kDims, int kGroup>
__device__ void attention_phase(const LayersArgs& a, const DecodeLayerPointers& l, const StepRows& step,
                                unsigned char* scratch) {
  auto& s = *reinterpret_cast<AttentionScratch<kDims, kGroup>*>(scratch);
  const KvCacheArgs att = attention_args(a, l);
  const QkvNormRopeArgs rope = rope_args(a, l);
  const int64_t units = a.splits * a.hkv * a.m;
  for (int64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
    attention_unit<kDims, kGroup>(att, rope, step, unit % a.splits, unit / a.splits % a.hkv,
                                  unit / (a.splits * a.hkv), s, a.merge_counts);
    __syncthreads();  // the unit's shared memory is rewritten by the next
  }
}

template <int kDims, int kGroup, int kRows>
__global__ void __launch_bounds__(kLayerThreads, 2) dense_decode_layers_kernel(const __grid_constant__ LayersArgs a) {
  extern __shared__ __align__(128) unsigned char shared[];
  __shared__ uint64_t loaded[kWeightKinds];
  unsigned char* scratch = shared + a.scratch_offset;
  uint4* staged = reinterpret_cast<uint4*>(scratch);
  const WeightStream stream{a, shared, loaded};
  unsigned target = 0;
  if (threadIdx.x == 0)
    for (uint64_t& barrier : loaded) mbarrier_init(&barrier);
  __syncthreads();
  // The weights are not written by the kernels before: their copies start before waiting for those.
  if (threadIdx.x == 0) stream.queue(0, kQkv);
  let_next_kernel_launch();
  wait_for_previous_kernel();
  __shared__ StepRows step;
  load_step_rows(a, step);

  // After a GEMM phase a block queues its buffer's next slice between its arrival at the barrier and its wait: the
  // copies' issue does not delay the arrival.
  for (int layer = 0; layer < a.layers; ++layer) {
    const DecodeLayerPointers& l = a.layer[layer];
    stage_rows<true, kLayerThreads>(a.h, l.input_norm, l.input_eps, a.m, a.hidden, staged);
    const uint4* qkv_rows = stream.wait(layer, kQkv);
    if (layer == 0 && threadIdx.x == 0) stream.queue_first_items_after_qkv();
    gemm_phase<false, kRows>(staged, a.m, a.hidden, qkv_rows, a.qkv_columns, a.qkv);
    grid_arrive(a.barrier, target);
    if (threadIdx.x == 0) stream.queue_next(layer, kQkv);
    grid_wait(a.barrier, target);

    attention_phase<kDims, kGroup>(a, l, step, scratch);
    grid_sync(a.barrier, target);

    stage_rows<false, kLayerThreads>(a.attention_out, nullptr, 0.0f, a.m, a.attention_width, staged);
    gemm_phase<true, kRows>(staged, a.m, a.attention_width, stream.wait(layer, kOProj), a.hidden, a.h);
    grid_arrive(a.barrier, target);
    if (threadIdx.x == 0) stream.queue_next(layer, kOProj);
    grid_wait(a.barrier, target);

    stage_rows<true, kLayerThreads>(a.h, l.post_norm, l.post_eps, a.m, a.hidden, staged);
    swiglu_phase<kRows>(staged, a.m, a.hidden, stream.wait(layer, kGateUp), a.intermediate, a.act);
    grid_arrive(a.barrier, target);
    if (threadIdx.x == 0) stream.queue_next(layer, kGateUp);
    grid_wait(a.barrier, target);

    stage_rows<false, kLayerThreads>(a.act, nullptr, 0.0f, a.m, a.intermediate, staged);
    gemm_phase<true, kRows>(staged, a.m, a.intermediate, stream.wait(layer, kDown), a.hidden, a.h);
    if (layer + 1 == a.layers) break;
    grid_arrive(a.barrier, target);
    if (threadIdx.x == 0) stream.queue_next(layer, kDown);
    grid_wait(a.barrier, target);
  }
  grid_sync_exit(a.barrier, target);
}

using LayersKernel = void (*)(LayersArgs);

// The kernel instance for head_dim d, `group` query heads per kv head (the grouped attention's instances that Qwen3's
// shapes use) and m rows (one, or up to kSkinnyMaxRows), with the size of its attention scratch; no kernel when there
// is none.
struct KernelInstance {
  LayersKernel kernel = nullptr;
  size_t attention_scratch = 0;
};

KernelInstance kernel_for(int64_t d, int64_t group, int64_t m) {
  if (m > kSkinnyMaxRows) return {};
  auto by_rows = [&](auto dims, auto group_constant) -> KernelInstance {
    constexpr int kDims = decltype(dims)::value, kGroup = decltype(group_constant)::value;
    const size_t scratch = sizeof(AttentionScratch<kDims, kGroup>);
    if (m == 1) return {dense_decode_layers_kernel<kDims, kGroup, 1>, scratch};
    return {dense_decode_layers_kernel<kDims, kGroup, kSkinnyMaxRows>, scratch};
  };
  auto by_group = [&](auto dims) -> KernelInstance {
    switch (group) {
      case 1: return by_rows(dims, std::integral_constant<int, 1>{});
      case 2: return by_rows(dims, std::integral_constant<int, 2>{});
      case 4: return by_rows(dims, std::integral_constant<int, 4>{});
      case 8: return by_rows(dims, std::integral_constant<int, 8>{});
      default: return {};
    }
  };
  if (d == 64) return by_group(std::integral_constant<int, 2>{});
  if (d == 128) return by_group(std::integral_constant<int, 4>{});
  return {};
}

struct DeviceLimits {
  int sms = 0, major = 0;
  size_t shared_per_sm = 0, shared_optin = 0, reserved_per_block = 0;
};

const DeviceLimits& device_limits() {
  static const DeviceLimits limits = [] {
    DeviceLimits l;
    int device = 0, per_sm = 0, optin = 0, reserved = 0;
    VEOMNI_CUDA_CHECK(cudaGetDevice(&device));
    VEOMNI_CUDA_CHECK(cudaDeviceGetAttribute(&l.sms, cudaDevAttrMultiProcessorCount, device));
    VEOMNI_CUDA_CHECK(cudaDeviceGetAttribute(&l.major, cudaDevAttrComputeCapabilityMajor, device));
    VEOMNI_CUDA_CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
    VEOMNI_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    VEOMNI_CUDA_CHECK(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device));
    l.shared_per_sm = static_cast<size_t>(per_sm);
    l.shared_optin = static_cast<size_t>(optin);
    l.reserved_per_block = static_cast<size_t>(reserved);
    return l;
  }();
  return limits;
}

// The kernel's counters in device memory: the grid barrier's, then the merge arrivals of kMergeCounts (row, kv head)
// pairs (decode_layer_run.cuh's zeroed_device_counters).
unsigned* kernel_counters() {
  static unsigned* counters = nullptr;
  return zeroed_device_counters(counters, 1 + kMergeCounts);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t round_up_128(int64_t bytes) { return ceil_div(bytes, 128) * 128; }

// The shapes a plan depends on.
struct LayerShape {
  int64_t hidden, m, head_dim, group, qkv_columns, attention_width, intermediate;
  std::array<int64_t, 7> key() const {
    return {hidden, m, head_dim, group, qkv_columns, attention_width, intermediate};
  }
};

// How the kernel runs: its grid (every block resident), which buffer each kind of slice streams into, and the
// dynamic shared memory: the buffers, each as large as the greatest slice it holds, then the scratch area.
struct LayersPlan {
  LayersKernel kernel = nullptr;
  int blocks = 0;
  std::array<int, kWeightKinds> buffer_of{};
  std::array<uint32_t, kWeightKinds> buffer_offset{};
  uint32_t scratch_offset = 0;
  size_t bytes = 0;
};

// The buffer layouts tried, the most lookahead first: a buffer per kind; o_proj and down sharing one; q/k/v and
// gate|up sharing another too.
constexpr std::array<std::array<int, kWeightKinds>, 3> kBufferLayouts{{{0, 1, 2, 3}, {0, 1, 2, 1}, {0, 1, 0, 1}}};

std::optional<LayersPlan> make_plan(const LayerShape& s) {
  const DeviceLimits& limits = device_limits();
  if (limits.major < 9) return std::nullopt;  // the copy engine's bulk copies and the early launches are Hopper's
  const KernelInstance instance = kernel_for(s.head_dim, s.group, s.m);
  if (instance.kernel == nullptr) return std::nullopt;
  cudaFuncAttributes attributes{};
  VEOMNI_CUDA_CHECK(cudaFuncGetAttributes(&attributes, instance.kernel));
  if (attributes.sharedSizeBytes >= limits.shared_optin) return std::nullopt;
  // The most any plan asks for: each launch passes its own size.
  VEOMNI_CUDA_CHECK(cudaFuncSetAttribute(instance.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(limits.shared_optin - attributes.sharedSizeBytes)));
  constexpr int64_t kBf16 = sizeof(__nv_bfloat16);
  const int64_t staged = s.m * std::max({s.hidden, s.attention_width, s.intermediate}) * kBf16;
  const int64_t scratch = std::max(staged, static_cast<int64_t>(instance.attention_scratch));
  for (int per_sm : {2, 1}) {
    const int64_t blocks = static_cast<int64_t>(per_sm) * limits.sms;
    const std::array<int64_t, kWeightKinds> slice{ceil_div(s.qkv_columns, blocks) * s.hidden * kBf16,
                                                  ceil_div(s.hidden, blocks) * s.attention_width * kBf16,
                                                  2 * ceil_div(s.intermediate, blocks) * s.hidden * kBf16,
                                                  ceil_div(s.hidden, blocks) * s.intermediate * kBf16};
    // A block's share of the SM's shared memory, beside its static arrays and the per-block reservation.
    const size_t share = std::min(limits.shared_optin, limits.shared_per_sm / per_sm - limits.reserved_per_block);
    if (attributes.sharedSizeBytes >= share) continue;
    const size_t dynamic_most = share - attributes.sharedSizeBytes;
    for (const std::array<int, kWeightKinds>& layout : kBufferLayouts) {
      std::array<int64_t, kWeightKinds> buffer_bytes{};
      for (int kind = 0; kind < kWeightKinds; ++kind)
        buffer_bytes[layout[kind]] = std::max(buffer_bytes[layout[kind]], round_up_128(slice[kind]));
      LayersPlan plan;
      plan.kernel = instance.kernel;
      plan.blocks = static_cast<int>(blocks);
      plan.buffer_of = layout;
      int64_t offset = 0;
      for (int b = 0; b < kWeightKinds; ++b) {
        plan.buffer_offset[b] = static_cast<uint32_t>(offset);
        offset += buffer_bytes[b];
      }
      plan.scratch_offset = static_cast<uint32_t>(offset);
      plan.bytes = static_cast<size_t>(offset + scratch);
      if (plan.bytes > dynamic_most) continue;
      int resident = 0;
      VEOMNI_CUDA_CHECK(
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, plan.kernel, kLayerThreads, plan.bytes));
      if (resident < per_sm) continue;
      return plan;
    }
  }
  return std::nullopt;
}

// make_plan's answer, kept per shape.
std::optional<LayersPlan> plan_for(const LayerShape& s) {
  static std::map<std::array<int64_t, 7>, std::optional<LayersPlan>> plans;
  auto found = plans.find(s.key());
  if (found == plans.end()) found = plans.emplace(s.key(), make_plan(s)).first;
  return found->second;
}

LayerShape layer_shape_of(const DenseDecodeLayer& layer, const Tensor& h) {
  return {h.dim(1),        h.dim(0),           layer.head_dim, layer.q_heads / layer.kv_heads,
          layer.qkv.dim(0), layer.o_proj.dim(1), layer.gate_up.dim(0) / 2};
}

}  // namespace

bool dense_decode_layer_kernel_enabled() {
  const char* value = std::getenv("VEOMNI_DECODE_LAYER_KERNEL");  // read each time: tests switch it
  return value != nullptr && std::strcmp(value, "1") == 0;
}

bool dense_decode_layers_kernel_fits(const std::vector<DenseDecodeLayer>& layers, const std::vector<Tensor>& k_caches,
                                     const std::vector<Tensor>& v_caches, const Tensor& h) {
  if (layers.empty() || h.dim(0) > kSkinnyMaxRows || layers[0].kv_heads > kMaxKvHeads) return false;
  if (!uniform_bf16_layers(layers, k_caches, v_caches, h)) return false;
  const DenseDecodeLayer& layer = layers[0];
  // The GEMM phases are the skinny kernel's (rows, K a multiple of 8, VEOMNI_SKINNY_GEMM): the same conditions.
  if (!skinny_matmul_applies(h, false, layer.qkv, true, h, 1.0f, 0.0f, &layer.input_norm)) return false;
  if (layer.o_proj.dim(1) % kChunk != 0 || layer.down.dim(1) % kChunk != 0) return false;
  if (!plan_for(layer_shape_of(layer, h))) return false;
  return kernel_counters() != nullptr;
}

int dense_decode_layers_buffers(const DenseDecodeLayer& layer, const Tensor& h) {
  const std::optional<LayersPlan> plan = plan_for(layer_shape_of(layer, h));
  if (!plan) return 0;
  return 1 + *std::max_element(plan->buffer_of.begin(), plan->buffer_of.end());
}

void dense_decode_layers(const std::vector<DenseDecodeLayer>& layers, const Tensor& cos, const Tensor& sin,
                         const Tensor& write_rows, const Tensor& cache_rows, std::vector<Tensor>& k_caches,
                         std::vector<Tensor>& v_caches, Tensor& h) {
  const DenseDecodeLayer& first = layers.front();
  const int64_t m = h.dim(0), hq = first.q_heads, hkv = first.kv_heads, d = first.head_dim;
  const std::optional<LayersPlan> plan = plan_for(layer_shape_of(first, h));
  VEOMNI_CHECK(plan.has_value(), "dense_decode_layers: no persistent-kernel plan for these shapes");
  unsigned* counters = kernel_counters();
  VEOMNI_CHECK(counters != nullptr, "dense_decode_layers: the kernel's counters were first needed inside a capture");

  const Tensor& k_cache = k_caches.front();
  Tensor qkv = Tensor::empty({m, first.qkv.dim(0)}, DType::BF16, h.device());
  Tensor attention_out = Tensor::empty({m, hq, d}, DType::BF16, h.device());
  Tensor act = Tensor::empty({m, first.gate_up.dim(0) / 2}, DType::BF16, h.device());
  const int64_t cache_len = k_cache.dim(1);
  const int64_t keys_per_split = keys_per_split_for(cache_len, hkv, m);
  const int64_t splits = ceil_div(cache_len, keys_per_split);
  Tensor partial;
  if (splits > 1) partial = Tensor::empty({m * hq * splits * (d + 2)}, DType::F32, h.device());

  LayersArgs args{};
  args.h = data_of<__nv_bfloat16>(h);
  args.qkv = data_of<__nv_bfloat16>(qkv);
  args.attention_out = data_of<__nv_bfloat16>(attention_out);
  args.act = data_of<__nv_bfloat16>(act);
  args.partial = splits > 1 ? data_of<float>(partial) : nullptr;
  args.barrier = counters;
  args.merge_counts = counters + 1;
  args.cos = data_of<const float>(cos);
  args.sin = data_of<const float>(sin);
  args.write_rows = data_of<const int32_t>(write_rows);
  args.cache_rows = data_of<const int32_t>(cache_rows);
  args.m = m;
  args.hidden = h.dim(1);
  args.qkv_columns = first.qkv.dim(0);
  args.attention_width = hq * d;
  args.intermediate = first.gate_up.dim(0) / 2;
  args.hq = hq;
  args.hkv = hkv;
  args.d = d;
  args.batch = k_cache.dim(0);
  args.cache_len = cache_len;
  args.splits = splits;
  args.keys_per_split = keys_per_split;
  for (int kind = 0; kind < kWeightKinds; ++kind) {
    args.buffer_of[kind] = plan->buffer_of[kind];
    args.buffer_offset[kind] = plan->buffer_offset[kind];
  }
  args.scratch_offset = plan->scratch_offset;
  for (size_t begin = 0; begin < layers.size(); begin += kMaxLayersPerLaunch) {
    const size_t end = std::min(layers.size(), begin + kMaxLayersPerLaunch);
    args.layers = static_cast<int>(end - begin);
    for (size_t i = begin; i < end; ++i)
      args.layer[i - begin] = decode_layer_pointers(layers[i], k_caches[i], v_caches[i]);
    launch_overlapped(plan->kernel, dim3(static_cast<unsigned>(plan->blocks)), dim3(kLayerThreads), plan->bytes,
                      args);
  }
}

}  // namespace veomni::ops::cuda
