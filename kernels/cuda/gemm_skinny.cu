// The skinny GEMM of decoding: out [M, N] = x [M, K] W[N, K]^T in bf16 for M <= kSkinnyMaxRows. Blocks stay resident
// over the whole output with x's rows staged (and normalised) in their shared memory; a warp takes up to four
// adjacent columns for short rows, then the same columns a grid further on. The lanes read W's rows in 16-byte
// chunks (8 bf16), each chunk once, against the matching chunks of every row of x, accumulating in fp32; a warp sum
// per row and column, in a fixed order (deterministic, the same bits whatever the columns a warp or where x is
// read from). Rows of x too long to stage (more than half an SM's shared memory) are read by each warp instead.
// Each lane loads its first chunks of W before waiting for the kernel before (dependent_launch.cuh), so under
// OverlappedLaunches the weight stream starts while that kernel still runs. Options on the same loop: the RMSNorm of
// x's rows in front, adding the product to out (beta 1: a residual add) and SwiGLU over a fused [gate; up] weight.
#include "kernels/cuda/gemm_skinny.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/bulk_copy.cuh"
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/skinny_dot.cuh"

namespace veomni::ops::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

struct SkinnyArgs {
  const __nv_bfloat16* x;
  const __nv_bfloat16* w;
  __nv_bfloat16* out;
  const __nv_bfloat16* gain;  // the RMSNorm's weight [K] when the kernel normalises x's rows
  float eps;
  int64_t m, n, k;  // n: output columns (the intermediate size for SwiGLU)
};

// A weight chunk through the read-only path, its L2 lines the first evicted (l2_evict_first_policy): a decode step
// reads each weight once, so its lines need not push out of L2 what the next step reads again (with the clustered
// kernel's slices evict-first as well, the 0.6B shape's batch-1 decode is about 0.5% faster: bench/RESULTS.md).
__device__ __forceinline__ uint4 load_weight(const uint4* chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint4 v;
  asm("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(chunk), "l"(l2_evict_first_policy()));
  return v;
#else
  return __ldg(chunk);
#endif
}

// The first kHead of a lane's chunks (chunk lane + i * kWarp) of each of kColumns weight rows, loaded into registers
// before the kernel waits for its predecessor: the weights are not written by the kernels before, so their stream
// starts while those still run.
template <int kHead, int kColumns>
struct WeightHeads {
  uint4 chunk[kHead][kColumns];

  __device__ __forceinline__ void load(const uint4* const (&rows)[kColumns], int64_t chunks, int lane) {
#pragma unroll
    for (int i = 0; i < kHead; ++i) {
      const int64_t c = lane + static_cast<int64_t>(i) * kWarp;
#pragma unroll
      for (int j = 0; j < kColumns; ++j) chunk[i][j] = c < chunks ? load_weight(rows[j] + c) : make_uint4(0, 0, 0, 0);
    }
  }
};

// acc[j][r] += the lane's share of x[r, :] . rows[j]: its chunks in ascending order, the first kHead from `head`, the
// rest read here. The order, and so the bits, depend on neither kHead nor kColumns.
template <int kHead, typename XSource, int kRows, int kColumns>
__device__ __forceinline__ void dot_rows(const XSource& x, int64_t chunks, const uint4* const (&rows)[kColumns],
                                         const WeightHeads<kHead, kColumns>& head, int lane,
                                         float (&acc)[kColumns][kRows]) {
#pragma unroll
  for (int i = 0; i < kHead; ++i) {
    const int64_t c = lane + static_cast<int64_t>(i) * kWarp;
    if (c < chunks) accumulate_chunk(x, head.chunk[i], c, acc);
  }
  // The rest of the row: only long rows (a single column a warp) have one, read kRestBatch chunks at a time, all
  // loaded before any is summed: 8 for one row, 4 for several, whose sums take the registers (16 and 8 would spill).
  // Read four at a time with the loads and sums interleaved, the 8B down_proj at one row (K 12,288) ran 24% slower
  // than cuBLASLt on one H200; in batches of 8 it runs faster (bench/RESULTS.md). The sums keep the chunks' order.
  if constexpr (kColumns == 1) {
    constexpr int kRestBatch = kRows == 1 ? 8 : 4;
    for (int64_t base = lane + static_cast<int64_t>(kHead) * kWarp; base < chunks; base += kRestBatch * kWarp) {
      uint4 batch[kRestBatch];
#pragma unroll
      for (int i = 0; i < kRestBatch; ++i) {
        const int64_t c = base + static_cast<int64_t>(i) * kWarp;
        batch[i] = c < chunks ? load_weight(rows[0] + c) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int i = 0; i < kRestBatch; ++i) {
        const int64_t c = base + static_cast<int64_t>(i) * kWarp;
        const uint4 w[1] = {batch[i]};
        if (c < chunks) accumulate_chunk(x, w, c, acc);
      }
    }
  } else {
#pragma unroll 1
    for (int64_t c = lane + static_cast<int64_t>(kHead) * kWarp; c < chunks; c += kWarp) {
      uint4 w[kColumns];
#pragma unroll
      for (int j = 0; j < kColumns; ++j) w[j] = load_weight(rows[j] + c);
      accumulate_chunk(x, w, c, acc);
    }
  }
}

// The weight rows of a warp's outputs from column `first` on: kColumns adjacent rows, or with kSwiglu the gate and up
// rows (j and n + j of the [gate; up] weight) of kColumns / 2 adjacent columns. Past the end, the last column's again
// (loaded, never stored).
template <bool kSwiglu, int kColumns>
__device__ __forceinline__ void point_rows(const SkinnyArgs& a, int64_t first, const uint4* (&rows)[kColumns]) {
  if constexpr (kSwiglu) {
#pragma unroll
    for (int p = 0; p < kColumns / 2; ++p) {
      const int64_t column = min(first + p, a.n - 1);
      rows[2 * p] = reinterpret_cast<const uint4*>(a.w + column * a.k);
      rows[2 * p + 1] = reinterpret_cast<const uint4*>(a.w + (a.n + column) * a.k);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kColumns; ++j) rows[j] = reinterpret_cast<const uint4*>(a.w + min(first + j, a.n - 1) * a.k);
  }
}

// out[r, first + p] = silu(g) * u of the warp's gate and up sums acc[2p][r] and acc[2p + 1][r] (swiglu_result).
template <int kColumns, int kRows>
__device__ __forceinline__ void store_swiglu_columns(const SkinnyArgs& a, int64_t first,
                                                     float (&acc)[kColumns][kRows], int lane) {
#pragma unroll
  for (int p = 0; p < kColumns / 2; ++p) {
    const int64_t column = first + p;
    if (column >= a.n) break;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r >= a.m) break;
      const __nv_bfloat16 act = swiglu_result(warp_sum(acc[2 * p][r]), warp_sum(acc[2 * p + 1][r]));
      if (lane == 0) a.out[r * a.n + column] = act;
    }
  }
}

// out[r, first + j] = the warp's sums acc[j][r] (+ out's old value when kAccumulate: one rounding of the fp32 sum).
template <bool kAccumulate, int kColumns, int kRows>
__device__ __forceinline__ void store_columns(const SkinnyArgs& a, int64_t first, float (&acc)[kColumns][kRows],
                                              int lane) {
#pragma unroll
  for (int j = 0; j < kColumns; ++j) {
    const int64_t column = first + j;
    if (column >= a.n) break;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r >= a.m) break;
      const float sum = warp_sum(acc[j][r]);
      if (lane != 0) continue;
      __nv_bfloat16& out = a.out[r * a.n + column];
      out = column_result(sum, kAccumulate, kAccumulate ? out : __nv_bfloat16());
    }
  }
}

// out = x W^T (+ out when kAccumulate) with x's rows staged in shared memory once a block (normalised there), the
// blocks resident for the whole GEMM: each warp takes kColumns adjacent columns, then the same columns a grid
// further on, its next rows' loads in flight while it sums and stores the last. With short rows one column's loads
// are too few to keep the memory busy and the fixed cost of a warp (x's norm, the sums) would dominate a one-shot
// warp: the LM head of a batch-1 step ran at under half the bandwidth that way. With kSwiglu, out = SwiGLU of x
// [gate; up]^T: a warp's kColumns rows are the gate and up rows of kColumns / 2 output columns.
template <bool kAccumulate, bool kNorm, int kHead, int kColumns, int kRows, bool kSwiglu = false>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp, 2) skinny_staged_kernel(SkinnyArgs a) {
  extern __shared__ uint4 staged[];
  constexpr int kOutputs = kSwiglu ? kColumns / 2 : kColumns;  // output columns a warp
  let_next_kernel_launch();
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t chunks = a.k / kChunk;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock * kOutputs;
  int64_t first = (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp) * kOutputs;
  const uint4* rows[kColumns];
  point_rows<kSwiglu>(a, first, rows);
  WeightHeads<kHead, kColumns> head;
  if (first < a.n) head.load(rows, chunks, lane);
  wait_for_previous_kernel();
  stage_rows<kNorm, kWarpsPerBlock * kWarp>(a.x, a.gain, a.eps, a.m, a.k, staged);
  const StagedRows x{staged, a.m, chunks};
  for (; first < a.n; first += stride) {
    float acc[kColumns][kRows] = {};
    dot_rows(x, chunks, rows, head, lane, acc);
    if (first + stride < a.n) {
      point_rows<kSwiglu>(a, first + stride, rows);
      head.load(rows, chunks, lane);
    }
    if constexpr (kSwiglu) {
      store_swiglu_columns(a, first, acc, lane);
    } else {
      store_columns<kAccumulate>(a, first, acc, lane);
    }
  }
}

// out[r, column] = x[r] . W[column] (+ out[r, column] when kAccumulate) for rows too long to stage: a warp per
// column, x's rows read (and normalised) by each warp.
template <bool kAccumulate, bool kNorm, int kHead, int kColumns, int kRows>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp) skinny_matmul_kernel(SkinnyArgs a) {
  let_next_kernel_launch();
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp) * kColumns;
  const uint4* rows[kColumns];
  point_rows<false>(a, first, rows);
  WeightHeads<kHead, kColumns> head;
  if (first < a.n) head.load(rows, a.k / kChunk, lane);
  wait_for_previous_kernel();
  if (first >= a.n) return;
  const XRows<kNorm, kRows> x(a.x, a.gain, a.eps, a.m, a.k, lane);
  float acc[kColumns][kRows] = {};
  dot_rows(x, a.k / kChunk, rows, head, lane, acc);
  store_columns<kAccumulate>(a, first, acc, lane);
}

// out[r, j] = silu(g) * u with g = x[r] . W[j] and u = x[r] . W[I + j], each rounded to bf16 first: the bits of the
// skinny GEMM into gate_up followed by swiglu_fused_forward (kernels/cuda/swiglu.cu's fp32 math), for rows too long
// to stage (skinny_staged_kernel takes the others). The gate and up rows stream together as the two columns of one
// warp, x's rows read (and normalised) by each warp.
template <bool kNorm, int kHead, int kRows>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp) skinny_swiglu_kernel(SkinnyArgs a) {
  let_next_kernel_launch();
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t column = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const uint4* rows[2];
  point_rows<true>(a, column, rows);
  WeightHeads<kHead, 2> head;
  if (column < a.n) head.load(rows, a.k / kChunk, lane);
  wait_for_previous_kernel();
  if (column >= a.n) return;
  const XRows<kNorm, kRows> x(a.x, a.gain, a.eps, a.m, a.k, lane);
  float acc[2][kRows] = {};
  dot_rows(x, a.k / kChunk, rows, head, lane, acc);
  store_swiglu_columns(a, column, acc, lane);
}

// The chunks a lane takes of a row of k elements.
int64_t chunks_per_lane(int64_t k) { return (k / kChunk + kWarp - 1) / kWarp; }

// Calls launch(std::integral_constant<int, H>) with H the head size for rows of k elements: the lane's whole share
// of the row, rounded up to 4 chunks, but at most kMost (the rest is read after the wait).
template <int kMost, typename Launch>
void with_head_for(int64_t k, Launch&& launch) {
  const int64_t per_lane = chunks_per_lane(k);
  if (per_lane <= 4) return launch(std::integral_constant<int, 4>{});
  if constexpr (kMost == 8) {
    launch(std::integral_constant<int, 8>{});
  } else {
    if (per_lane <= 8) return launch(std::integral_constant<int, 8>{});
    if (per_lane <= 12) return launch(std::integral_constant<int, 12>{});
    launch(std::integral_constant<int, 16>{});
  }
}

// Calls f(std::integral_constant<int, R>) with R = 1 for a single row, kSkinnyMaxRows otherwise.
template <typename F>
void with_rows(int64_t m, F&& f) {
  if (m == 1) return f(std::integral_constant<int, 1>{});
  f(std::integral_constant<int, static_cast<int>(kSkinnyMaxRows)>{});
}

bool aligned16(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0; }

bool skinny_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("VEOMNI_SKINNY_GEMM");
    return value == nullptr || std::strcmp(value, "0") != 0;
  }();
  return enabled;
}

// x [M, K] and a row-major weight of K columns, all bf16, that the kernels take.
bool skinny_operands(const Tensor& x, const Tensor& w, const Tensor& out) {
  if (x.dtype() != DType::BF16 || w.dtype() != DType::BF16 || out.dtype() != DType::BF16) return false;
  const int64_t m = x.dim(0), k = x.dim(1);
  if (m < 1 || m > kSkinnyMaxRows || k % kChunk != 0 || k == 0) return false;
  const int64_t weight_bytes = w.numel() * static_cast<int64_t>(sizeof(__nv_bfloat16));
  if (m > 1 && m * weight_bytes > kSkinnySeveralRowsMostBytes) return false;
  return aligned16(x) && aligned16(w) && skinny_enabled();
}

// A bf16 gain of x's row length, 16-byte aligned, or none.
bool skinny_gain(const Tensor* gain, const Tensor& x) {
  return gain == nullptr ||
         (gain->dtype() == DType::BF16 && gain->numel() == x.dim(1) && aligned16(*gain));
}

SkinnyArgs args_of(const Tensor& x, const Tensor* gain, float eps, const Tensor& w, Tensor& out, int64_t n) {
  return {data_of<const __nv_bfloat16>(x),
          data_of<const __nv_bfloat16>(w),
          data_of<__nv_bfloat16>(out),
          gain ? data_of<const __nv_bfloat16>(*gain) : nullptr,
          eps,
          x.dim(0),
          n,
          x.dim(1)};
}

constexpr unsigned kStagedBlocksPerSm = 2;
constexpr int64_t kDefaultSharedBytes = 48 * 1024;  // a block's dynamic shared memory without opting in

int device_attribute(cudaDeviceAttr attribute) {
  int device = 0, value = 0;
  VEOMNI_CUDA_CHECK(cudaGetDevice(&device));
  VEOMNI_CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, device));
  return value;
}

unsigned multiprocessors() { return static_cast<unsigned>(device_attribute(cudaDevAttrMultiProcessorCount)); }

// The most bytes of x the staged kernel takes: an SM's shared memory shared by its two blocks, less what each block
// reserves and stage_rows' static rstd array (113 KB on an H100 or H200: four rows of 8192 fit).
int64_t most_staged_bytes() {
  return device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor) / kStagedBlocksPerSm -
         device_attribute(cudaDevAttrReservedSharedMemoryPerBlock) -
         static_cast<int64_t>(kSkinnyMaxRows * sizeof(float));
}

unsigned blocks_for(int64_t columns, int columns_a_warp = 1) {
  const int64_t a_block = kWarpsPerBlock * columns_a_warp;
  return static_cast<unsigned>((columns + a_block - 1) / a_block);
}

int64_t staged_bytes(const SkinnyArgs& args) { return args.m * args.k * static_cast<int64_t>(sizeof(__nv_bfloat16)); }

// Launches a skinny_staged_kernel instantiation taking `outputs` columns a warp: as many blocks as the output needs,
// at most two an SM, each with x's rows in its dynamic shared memory (opted into past the default 48 KB).
template <typename Kernel>
void launch_staged(Kernel kernel, int outputs, const SkinnyArgs& args) {
  const int64_t bytes = staged_bytes(args);
  if (bytes > kDefaultSharedBytes)
    VEOMNI_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(most_staged_bytes())));
  const unsigned blocks = std::min(blocks_for(args.n, outputs), kStagedBlocksPerSm * multiprocessors());
  launch_overlapped(kernel, dim3(blocks), dim3(kWarpsPerBlock * kWarp), static_cast<size_t>(bytes), args);
}

// Calls f(std::bool_constant<norm>).
template <typename F>
void with_norm(bool norm, F&& f) {
  if (norm) return f(std::true_type{});
  f(std::false_type{});
}

}  // namespace

bool skinny_matmul_applies(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& out,
                           float alpha, float beta, const Tensor* gain) {
  if (trans_a || !trans_b || alpha != 1.0f || (beta != 0.0f && beta != 1.0f)) return false;
  return skinny_operands(a, b, out) && skinny_gain(gain, a);
}

void skinny_matmul(const Tensor& a, const Tensor& b, Tensor& out, bool accumulate, const Tensor* gain, float eps) {
  const SkinnyArgs args = args_of(a, gain, eps, b, out, b.dim(0));
  const bool staged = staged_bytes(args) <= most_staged_bytes();
  with_norm(gain != nullptr, [&](auto norm) {
    with_rows(args.m, [&](auto rows) {
      constexpr bool kNorm = decltype(norm)::value;
      constexpr int kRows = decltype(rows)::value;
      if (!staged) {  // rows this long have more than 12 chunks a lane: the head of 16
        const auto kernel = accumulate ? skinny_matmul_kernel<true, kNorm, 16, 1, kRows>
                                       : skinny_matmul_kernel<false, kNorm, 16, 1, kRows>;
        return launch_overlapped(kernel, dim3(blocks_for(args.n)), dim3(kWarpsPerBlock * kWarp), 0, args);
      }
      with_head_for<16>(args.k, [&](auto head) {
        constexpr int kHead = decltype(head)::value;
        // Columns a warp such that the head keeps up to 16 chunks a lane in flight (4 for K <= 1024, 2 up to 2048),
        // two at most for several rows, whose sums take the registers.
        constexpr int kColumns = kHead == 4 ? (kRows == 1 ? 4 : 2) : kHead == 8 ? 2 : 1;
        launch_staged(accumulate ? skinny_staged_kernel<true, kNorm, kHead, kColumns, kRows>
                                 : skinny_staged_kernel<false, kNorm, kHead, kColumns, kRows>,
                      kColumns, args);
      });
    });
  });
}

bool skinny_swiglu_applies(const Tensor& x, const Tensor& gate_up, const Tensor& out, const Tensor* gain) {
  return skinny_operands(x, gate_up, out) && aligned16(out) && skinny_gain(gain, x);
}

void skinny_swiglu(const Tensor& x, const Tensor& gate_up, Tensor& out, const Tensor* gain, float eps) {
  const SkinnyArgs args = args_of(x, gain, eps, gate_up, out, gate_up.dim(0) / 2);
  const bool staged = staged_bytes(args) <= most_staged_bytes();
  with_norm(gain != nullptr, [&](auto norm) {
    with_rows(args.m, [&](auto rows) {
      with_head_for<8>(args.k, [&](auto head) {
        constexpr bool kNorm = decltype(norm)::value;
        constexpr int kRows = decltype(rows)::value, kHead = decltype(head)::value;
        if (!staged) {
          return launch_overlapped(skinny_swiglu_kernel<kNorm, kHead, kRows>, dim3(blocks_for(args.n)),
                                   dim3(kWarpsPerBlock * kWarp), 0, args);
        }
        // A gate and an up row an output column; two columns a warp for one row of up to 1024 (16 chunks a lane).
        constexpr int kColumns = kHead == 4 && kRows == 1 ? 4 : 2;
        launch_staged(skinny_staged_kernel<false, kNorm, kHead, kColumns, kRows, true>, kColumns / 2, args);
      });
    });
  });
}

}  // namespace veomni::ops::cuda
