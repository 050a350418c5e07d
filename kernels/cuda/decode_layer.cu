// A dense decoder layer's decode step as one persistent kernel (ops::dense_decode_layer on CUDA). Op by op, a step
// of a few rows is seven short kernels whose launches, ramps and tails cost more than their memory traffic; here one
// grid of blocks that are all resident at once runs the seven phases with grid barriers between them, and every
// block's slice of the four weight matrices streams into its shared memory through the copy engine ahead of the
// phase that reads it: the next slice is queued as soon as the block has read the one before from that buffer, so
// the weight stream runs on while the short dependent phases (q/k norm and RoPE, attention, the splits' merge) and
// the barriers do. Each phase runs the device code of the op it replaces (skinny_dot.cuh, qkv_norm_rope.cuh,
// attention_kv_cache.cuh) on the same units of work, so the results are those ops' bits.
// Opt-in (VEOMNI_DECODE_LAYER_KERNEL=1, decode_layer.h): on an H100 a Qwen3-0.6B layer takes 47 us here against 42 us
// for the ops launched early, because each grid barrier costs 4-6 us while the weight stream saturates the memory
// system (bench/RESULTS.md); fewer barriers (q/k norm and RoPE inside the attention phase, the splits merged by the
// last split to finish) are the next step.
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

// Four warps a block: the attention and q/k-norm phases' block size.
constexpr int kLayerWarps = kKvCacheWarps;
static_assert(kLayerWarps == kQkvNormRopeWarps, "the phases share one block size");
constexpr int kLayerThreads = kLayerWarps * kWarp;

// Columns [begin, end) of n that a block owns in a GEMM phase (the blocks' shares differ by one column at most).
struct Slice {
  int64_t begin, end;
};

__host__ __device__ inline Slice slice_of(int64_t n, int64_t block, int64_t blocks) {
  return {n * block / blocks, n * (block + 1) / blocks};
}

struct DecodeLayerArgs {
  __nv_bfloat16* h;  // [m, hidden], updated in place
  const __nv_bfloat16* input_norm;
  const __nv_bfloat16* post_norm;
  float input_eps, post_eps;
  const __nv_bfloat16* qkv_weight;  // [qkv_columns, hidden]
  const __nv_bfloat16* o_weight;  // [hidden, attention_width]
  const __nv_bfloat16* gate_up_weight;  // [2 intermediate, hidden]
  const __nv_bfloat16* down_weight;  // [hidden, intermediate]
  __nv_bfloat16* qkv;  // [m, qkv_columns]
  __nv_bfloat16* act;  // [m, intermediate]
  int64_t m, hidden, qkv_columns, attention_width, intermediate;
  QkvNormRopeArgs rope;  // qkv -> q (and k, v) and the caches
  KvCacheArgs attention;  // q and the caches -> the attention's output, which o_proj reads
  uint32_t second_buffer;  // the second weight buffer's offset in dynamic shared memory
  uint32_t staged_rows;  // the offset of the GEMM input rows staged in shared memory
  unsigned* barrier;  // the grid barrier's counter (grid_barrier.cuh)
};

// Queues (one thread) this block's slice of a GEMM phase's weight [n or 2n, k] into `buffer`: its columns' rows and,
// for gate|up, the up rows n rows further, after them.
__device__ void queue_slice(const __nv_bfloat16* w, int64_t n, int64_t k, bool gate_up, void* buffer,
                            uint64_t* loaded) {
  const Slice s = slice_of(n, blockIdx.x, gridDim.x);
  const uint32_t bytes = static_cast<uint32_t>((s.end - s.begin) * k * sizeof(__nv_bfloat16));
  mbarrier_expect_bytes(loaded, gate_up ? 2 * bytes : bytes);
  if (bytes == 0) return;
  bulk_copy_to_shared(buffer, w + s.begin * k, bytes, loaded);
  if (gate_up) bulk_copy_to_shared(static_cast<char*>(buffer) + bytes, w + (n + s.begin) * k, bytes, loaded);
}

// x's rows [m, k] as the GEMM phase's dot products read them, staged in shared memory as 16-byte chunks: as stored,
// or normalised by RMSNorm (kNorm) with the bits of the skinny kernel's XRows (skinny_dot.cuh): the rstd of each row
// from the same per-lane sums of squares and butterfly, each value (x * rstd) * gain rounded to bf16.
template <bool kNorm>
__device__ void stage_rows(const __nv_bfloat16* x, const __nv_bfloat16* gain, float eps, int64_t m, int64_t k,
                           uint4* staged) {
  __shared__ float rstd[kSkinnyMaxRows];
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const int64_t chunks = k / kChunk;
  if constexpr (kNorm) {
    for (int64_t r = warp; r < m; r += kLayerWarps) {
      const float row = row_rstd(x + r * k, k, eps, lane);
      if (lane == 0) rstd[r] = row;
    }
    __syncthreads();
  }
  for (int64_t i = threadIdx.x; i < m * chunks; i += kLayerThreads) {
    const int64_t r = i / chunks, c = i % chunks;
    uint4 raw = reinterpret_cast<const uint4*>(x + r * k)[c];
    if constexpr (kNorm) {
      float xf[kChunk], gf[kChunk];
      unpack(raw, xf);
      unpack(__ldg(reinterpret_cast<const uint4*>(gain) + c), gf);
      __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&raw);
      for (int j = 0; j < kChunk / 2; ++j)
        pairs[j] = __halves2bfloat162(__float2bfloat16_rn((xf[2 * j] * rstd[r]) * gf[2 * j]),
                                      __float2bfloat16_rn((xf[2 * j + 1] * rstd[r]) * gf[2 * j + 1]));
    }
    staged[i] = raw;
  }
  __syncthreads();
}

// acc[r] += the lane's share of staged row r . w_row (both in shared memory): the skinny kernel's chunk order and
// arithmetic (accumulate_chunk), so its bits.
__device__ __forceinline__ void dot_staged(const uint4* staged, int64_t m, int64_t chunks, const uint4* w_row,
                                           int lane, float (&acc)[kSkinnyMaxRows]) {
#pragma unroll 2
  for (int64_t c = lane; c < chunks; c += kWarp) {
    float wf[kChunk];
    unpack(w_row[c], wf);
    for (int r = 0; r < kSkinnyMaxRows; ++r) {
      if (r >= m) break;
      float xf[kChunk];
      unpack(staged[r * chunks + c], xf);
      for (int i = 0; i < kChunk; ++i) acc[r] += wf[i] * xf[i];
    }
  }
}

// out[r, column] (+)= x[r] . W[column] for the block's columns, W's rows and x's staged rows in shared memory:
// skinny_matmul's bits.
template <bool kAccumulate>
__device__ void gemm_phase(const uint4* staged, int64_t m, int64_t k, const uint4* rows, int64_t n,
                           __nv_bfloat16* out) {
  const Slice s = slice_of(n, blockIdx.x, gridDim.x);
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const int64_t chunks = k / kChunk;
  for (int64_t column = s.begin + warp; column < s.end; column += kLayerWarps) {
    float acc[kSkinnyMaxRows] = {};
    dot_staged(staged, m, chunks, rows + (column - s.begin) * chunks, lane, acc);
    for (int r = 0; r < kSkinnyMaxRows; ++r) {
      if (r >= m) break;
      const float sum = warp_sum(acc[r]);
      if (lane != 0) continue;
      __nv_bfloat16& o = out[r * n + column];
      o = column_result(sum, kAccumulate, kAccumulate ? o : __nv_bfloat16());
    }
  }
}

// out[r, j] = SwiGLU of staged x[r] against gate row j and up row j (after the block's gate rows in shared memory):
// skinny_swiglu's bits.
__device__ void swiglu_phase(const uint4* staged, int64_t m, int64_t k, const uint4* rows, int64_t n,
                             __nv_bfloat16* out) {
  const Slice s = slice_of(n, blockIdx.x, gridDim.x);
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const int64_t chunks = k / kChunk, columns = s.end - s.begin;
  for (int64_t column = s.begin + warp; column < s.end; column += kLayerWarps) {
    float gate[kSkinnyMaxRows] = {};
    float up[kSkinnyMaxRows] = {};
    dot_staged(staged, m, chunks, rows + (column - s.begin) * chunks, lane, gate);
    dot_staged(staged, m, chunks, rows + (columns + column - s.begin) * chunks, lane, up);
    for (int r = 0; r < kSkinnyMaxRows; ++r) {
      if (r >= m) break;
      const __nv_bfloat16 act = swiglu_result(warp_sum(gate[r]), warp_sum(up[r]));
      if (lane == 0) out[r * n + column] = act;
    }
  }
}

// The q/k norms, RoPE and cache writes: one warp per (token, head), as qkv_norm_rope_cache_write.
__device__ void rope_phase(const QkvNormRopeArgs& a, int64_t m, float (*scratch)[kMaxHeadDim]) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const int64_t heads = a.hq + 2 * a.hkv;
  for (int64_t unit = static_cast<int64_t>(blockIdx.x) * kLayerWarps + warp; unit < m * heads;
       unit += static_cast<int64_t>(gridDim.x) * kLayerWarps) {
    qkv_norm_rope_head(a, unit / heads, unit % heads, scratch[warp], lane);
    __syncwarp();  // the warp's scratch is rewritten by its next unit
  }
}

// Attention over the cache: one block per (split, kv head, row), then (several splits) one per (query head, row)
// merging them, with a grid barrier between.
template <int kDims, int kGroup>
__device__ void attention_phases(const KvCacheArgs& a, unsigned* barrier, unsigned& target) {
  const int64_t units = a.splits * a.hkv * a.n;
  for (int64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
    attention_grouped_unit<__nv_bfloat16, kDims, kGroup>(a, unit % a.splits, unit / a.splits % a.hkv,
                                                         unit / (a.splits * a.hkv));
    __syncthreads();  // the unit's shared memory is rewritten by the next
  }
  if (a.splits == 1) return;
  grid_sync(barrier, target);
  for (int64_t unit = blockIdx.x; unit < a.hq * a.n; unit += gridDim.x)
    attention_merge_unit(a, unit % a.hq, unit / a.hq);
}

template <int kDims, int kGroup>
__global__ void __launch_bounds__(kLayerThreads, 2) dense_decode_layer_kernel(DecodeLayerArgs a) {
  extern __shared__ __align__(128) unsigned char buffers[];
  __shared__ uint64_t loaded[2];
  __shared__ float rope_scratch[kLayerWarps][kMaxHeadDim];
  unsigned char* first = buffers;
  unsigned char* second = buffers + a.second_buffer;
  uint4* staged = reinterpret_cast<uint4*>(buffers + a.staged_rows);
  const uint4* first_rows = reinterpret_cast<const uint4*>(first);
  const uint4* second_rows = reinterpret_cast<const uint4*>(second);
  unsigned target = 0;
  if (threadIdx.x == 0) {
    mbarrier_init(&loaded[0]);
    mbarrier_init(&loaded[1]);
  }
  __syncthreads();
  // The weights are not written by the kernels before: their copies start before waiting for those.
  if (threadIdx.x == 0) {
    queue_slice(a.qkv_weight, a.qkv_columns, a.hidden, false, first, &loaded[0]);
    queue_slice(a.o_weight, a.hidden, a.attention_width, false, second, &loaded[1]);
  }
  let_next_kernel_launch();
  wait_for_previous_kernel();

  stage_rows<true>(a.h, a.input_norm, a.input_eps, a.m, a.hidden, staged);
  mbarrier_wait(&loaded[0], 0);
  gemm_phase<false>(staged, a.m, a.hidden, first_rows, a.qkv_columns, a.qkv);
  __syncthreads();
  if (threadIdx.x == 0) queue_slice(a.gate_up_weight, a.intermediate, a.hidden, true, first, &loaded[0]);
  grid_sync(a.barrier, target);

  rope_phase(a.rope, a.m, rope_scratch);
  grid_sync(a.barrier, target);

  attention_phases<kDims, kGroup>(a.attention, a.barrier, target);
  grid_sync(a.barrier, target);

  stage_rows<false>(static_cast<const __nv_bfloat16*>(a.attention.out.data), nullptr, 0.0f, a.m, a.attention_width,
                    staged);
  mbarrier_wait(&loaded[1], 0);
  gemm_phase<true>(staged, a.m, a.attention_width, second_rows, a.hidden, a.h);
  __syncthreads();
  if (threadIdx.x == 0) queue_slice(a.down_weight, a.hidden, a.intermediate, false, second, &loaded[1]);
  grid_sync(a.barrier, target);

  stage_rows<true>(a.h, a.post_norm, a.post_eps, a.m, a.hidden, staged);
  mbarrier_wait(&loaded[0], 1);
  swiglu_phase(staged, a.m, a.hidden, first_rows, a.intermediate, a.act);
  grid_sync(a.barrier, target);

  stage_rows<false>(a.act, nullptr, 0.0f, a.m, a.intermediate, staged);
  mbarrier_wait(&loaded[1], 1);
  gemm_phase<true>(staged, a.m, a.intermediate, second_rows, a.hidden, a.h);
  grid_sync_exit(a.barrier, target);
}

using LayerKernel = void (*)(DecodeLayerArgs);

// The kernel instance for head_dim d and `group` query heads per kv head (the grouped attention's instances that
// Qwen3's shapes use), or none.
LayerKernel kernel_for(int64_t d, int64_t group) {
  auto by_group = [&](auto dims) -> LayerKernel {
    constexpr int kDims = decltype(dims)::value;
    switch (group) {
      case 1: return dense_decode_layer_kernel<kDims, 1>;
      case 2: return dense_decode_layer_kernel<kDims, 2>;
      case 4: return dense_decode_layer_kernel<kDims, 4>;
      case 8: return dense_decode_layer_kernel<kDims, 8>;
      default: return nullptr;
    }
  };
  if (d == 64) return by_group(std::integral_constant<int, 2>{});
  if (d == 128) return by_group(std::integral_constant<int, 4>{});
  return nullptr;
}

struct DeviceLimits {
  int sms = 0, major = 0;
  size_t shared_optin = 0;
};

const DeviceLimits& device_limits() {
  static const DeviceLimits limits = [] {
    DeviceLimits l;
    int device = 0, shared = 0;
    VEOMNI_CUDA_CHECK(cudaGetDevice(&device));
    VEOMNI_CUDA_CHECK(cudaDeviceGetAttribute(&l.sms, cudaDevAttrMultiProcessorCount, device));
    VEOMNI_CUDA_CHECK(cudaDeviceGetAttribute(&l.major, cudaDevAttrComputeCapabilityMajor, device));
    VEOMNI_CUDA_CHECK(cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    l.shared_optin = static_cast<size_t>(shared);
    return l;
  }();
  return limits;
}

// The grid barrier's counter: allocated and zeroed once, outside any graph capture (a decode step runs eagerly
// before it is captured); null while none could be made yet.
unsigned* grid_barrier_counter() {
  static unsigned* counter = nullptr;
  if (counter == nullptr) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    VEOMNI_CUDA_CHECK(cudaStreamIsCapturing(cuda_rt::stream(), &capture));
    if (capture != cudaStreamCaptureStatusNone) return nullptr;
    VEOMNI_CUDA_CHECK(cudaMalloc(&counter, sizeof(unsigned)));
    VEOMNI_CUDA_CHECK(cudaMemset(counter, 0, sizeof(unsigned)));
  }
  return counter;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t round_up_128(int64_t bytes) { return ceil_div(bytes, 128) * 128; }

// How the kernel runs for a layer's shapes and m rows: its grid (every block resident) and its dynamic shared
// memory: two weight buffers, each as large as the greatest slice it holds (q/k/v then gate|up; o_proj then down),
// then the GEMM phases' staged input rows.
struct LayerPlan {
  LayerKernel kernel = nullptr;
  int blocks = 0;
  size_t first_bytes = 0, second_bytes = 0, staged_bytes = 0;
};

std::optional<LayerPlan> make_plan(const DenseDecodeLayer& layer, int64_t hidden, int64_t m) {
  const DeviceLimits& limits = device_limits();
  if (limits.major < 9) return std::nullopt;  // the copy engine's bulk copies and the early launches are Hopper's
  LayerPlan plan;
  plan.kernel = kernel_for(layer.head_dim, layer.q_heads / layer.kv_heads);
  if (plan.kernel == nullptr) return std::nullopt;
  cudaFuncAttributes attributes{};
  VEOMNI_CUDA_CHECK(cudaFuncGetAttributes(&attributes, plan.kernel));
  if (attributes.sharedSizeBytes >= limits.shared_optin) return std::nullopt;
  const size_t dynamic_most = limits.shared_optin - attributes.sharedSizeBytes;  // beside the kernel's static arrays
  VEOMNI_CUDA_CHECK(cudaFuncSetAttribute(plan.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(dynamic_most)));
  const int64_t qkv_columns = layer.qkv.dim(0), intermediate = layer.gate_up.dim(0) / 2;
  const int64_t attention_width = layer.o_proj.dim(1);
  constexpr int64_t kBf16 = sizeof(__nv_bfloat16);
  for (int per_sm : {2, 1}) {
    const int64_t blocks = static_cast<int64_t>(per_sm) * limits.sms;
    const int64_t first = std::max(ceil_div(qkv_columns, blocks), 2 * ceil_div(intermediate, blocks)) * hidden * kBf16;
    const int64_t second = ceil_div(hidden, blocks) * std::max(attention_width, intermediate) * kBf16;
    const int64_t staged = m * std::max({hidden, attention_width, intermediate}) * kBf16;
    const size_t bytes = static_cast<size_t>(round_up_128(first) + round_up_128(second) + staged);
    if (bytes > dynamic_most) continue;
    int resident = 0;
    VEOMNI_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, plan.kernel, kLayerThreads, bytes));
    if (resident < per_sm) continue;
    plan.blocks = static_cast<int>(blocks);
    plan.first_bytes = static_cast<size_t>(round_up_128(first));
    plan.second_bytes = static_cast<size_t>(round_up_128(second));
    plan.staged_bytes = static_cast<size_t>(staged);
    return plan;
  }
  return std::nullopt;
}

// make_plan's answer, kept per shape: a decode step asks for every layer.
std::optional<LayerPlan> plan_for(const DenseDecodeLayer& layer, int64_t hidden, int64_t m) {
  static std::map<std::array<int64_t, 7>, std::optional<LayerPlan>> plans;
  const std::array<int64_t, 7> key{hidden,           m,
                                   layer.head_dim,   layer.q_heads / layer.kv_heads,
                                   layer.qkv.dim(0), layer.o_proj.dim(1),
                                   layer.gate_up.dim(0)};
  auto found = plans.find(key);
  if (found == plans.end()) found = plans.emplace(key, make_plan(layer, hidden, m)).first;
  return found->second;
}

bool bf16_aligned(const Tensor& t) {
  return t.dtype() == DType::BF16 && reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0;
}

}  // namespace

bool dense_decode_layer_kernel_enabled() {
  const char* value = std::getenv("VEOMNI_DECODE_LAYER_KERNEL");  // read each time: tests switch it
  return value != nullptr && std::strcmp(value, "1") == 0;
}

bool dense_decode_layer_kernel_fits(const DenseDecodeLayer& layer, const Tensor& k_cache, const Tensor& v_cache,
                                    const Tensor& h) {
  for (const Tensor* t : {&h, &layer.input_norm, &layer.qkv, &layer.o_proj, &layer.post_attention_norm, &layer.gate_up,
                          &layer.down, &k_cache, &v_cache})
    if (!bf16_aligned(*t)) return false;
  // The GEMM phases are the skinny kernel's (rows, K a multiple of 8, VEOMNI_SKINNY_GEMM): the same conditions.
  if (!skinny_matmul_applies(h, false, layer.qkv, true, h, 1.0f, 0.0f, &layer.input_norm)) return false;
  if (layer.o_proj.dim(1) % kChunk != 0 || layer.down.dim(1) % kChunk != 0) return false;
  if (!plan_for(layer, h.dim(1), h.dim(0))) return false;
  return grid_barrier_counter() != nullptr;
}

void dense_decode_layer(const DenseDecodeLayer& layer, const Tensor& cos, const Tensor& sin, const Tensor& write_rows,
                        const Tensor& cache_rows, Tensor& k_cache, Tensor& v_cache, Tensor& h) {
  const int64_t m = h.dim(0), hidden = h.dim(1);
  const int64_t hq = layer.q_heads, hkv = layer.kv_heads, d = layer.head_dim;
  const int64_t intermediate = layer.gate_up.dim(0) / 2;
  const std::optional<LayerPlan> plan = plan_for(layer, hidden, m);
  VEOMNI_CHECK(plan.has_value(), "dense_decode_layer: no persistent-kernel plan for these shapes");
  unsigned* barrier = grid_barrier_counter();
  VEOMNI_CHECK(barrier != nullptr, "dense_decode_layer: the grid barrier was first needed inside a capture");

  Tensor qkv = Tensor::empty({m, layer.qkv.dim(0)}, DType::BF16, h.device());
  Tensor q = Tensor::empty({m, hq, d}, DType::BF16, h.device());
  Tensor k = Tensor::empty({m, hkv, d}, DType::BF16, h.device());
  Tensor v = Tensor::empty({m, hkv, d}, DType::BF16, h.device());
  Tensor attention_out = Tensor::empty({m, hq, d}, DType::BF16, h.device());
  Tensor act = Tensor::empty({m, intermediate}, DType::BF16, h.device());
  Tensor partial;

  DecodeLayerArgs args{};
  args.h = data_of<__nv_bfloat16>(h);
  args.input_norm = data_of<const __nv_bfloat16>(layer.input_norm);
  args.post_norm = data_of<const __nv_bfloat16>(layer.post_attention_norm);
  args.input_eps = layer.input_norm_eps;
  args.post_eps = layer.post_attention_norm_eps;
  args.qkv_weight = data_of<const __nv_bfloat16>(layer.qkv);
  args.o_weight = data_of<const __nv_bfloat16>(layer.o_proj);
  args.gate_up_weight = data_of<const __nv_bfloat16>(layer.gate_up);
  args.down_weight = data_of<const __nv_bfloat16>(layer.down);
  args.qkv = data_of<__nv_bfloat16>(qkv);
  args.act = data_of<__nv_bfloat16>(act);
  args.m = m;
  args.hidden = hidden;
  args.qkv_columns = layer.qkv.dim(0);
  args.attention_width = hq * d;
  args.intermediate = intermediate;
  args.rope = qkv_norm_rope_args(qkv, layer.q_norm, layer.k_norm, layer.qk_norm_eps, cos, sin, write_rows, q, k, v,
                                 k_cache, v_cache);
  args.attention = kv_cache_args(q, k_cache, v_cache, cache_rows, layer.scale, attention_out, partial);
  args.second_buffer = static_cast<uint32_t>(plan->first_bytes);
  args.staged_rows = static_cast<uint32_t>(plan->first_bytes + plan->second_bytes);
  args.barrier = barrier;
  launch_overlapped(plan->kernel, dim3(static_cast<unsigned>(plan->blocks)), dim3(kLayerThreads),
                    plan->first_bytes + plan->second_bytes + plan->staged_bytes, args);
}

}  // namespace veomni::ops::cuda
