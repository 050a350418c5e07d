// A run of dense decoder layers' batch-1 decode step as one persistent kernel of thread-block clusters, without a
// grid-wide barrier (kernels/cuda/decode_layer.cu's kernel has five a layer). Each kv head g has a cluster of eight
// blocks that computes its q/k/v columns, its attention and its share of o_proj without leaving the cluster:
//   q/k/v GEMM: block c of cluster g computes an eighth of the head group's q, k and v columns and stores them into
//     every block of the cluster (distributed shared memory, completing on the receiver's mbarrier);
//   attention: every block normalises and rotates the group's query heads and the new key, then attends over an
//     eighth of the cache; its partial sums are merged by every block from the others' shared memory; cluster barrier
//     in between;
//   o_proj split by heads: cluster g's eight blocks compute its heads' contribution to every output column (an eighth
//     of the columns each) into a partial sum in global memory;
// every cluster adds the kv heads' partial sums into h as they arrive (an eighth of the columns a block, shared
// through the cluster); then every block of the grid (the clusters beyond the kv heads too) computes its own slice of
// the gate|up SwiGLU columns and, split by those columns, their contribution to every column of down_proj; the
// cluster sums its eight blocks' contributions into one partial sum in global memory; every cluster adds the
// clusters' partial sums into h as they arrive. The partial sums travel with a flag in each word (flagged_words.cuh):
// a block waits for the sums it adds, not for every block of the grid. Within a cluster, the q/k/v columns, the down
// contributions and the columns of h go out as stores that complete on the receivers' mbarriers (cluster_stores.cuh).
// The GEMM slices stream into shared memory ahead of their phases through the copy engine: q/k/v and gate|up (runs of
// whole rows) into one buffer, o_proj and down (strided slices, through tensor maps) into another; each takes its
// next slice as soon as the block has read the one before. Their lines are the first evicted from L2: read once a
// step, they would otherwise push out what the step reads again (about 2% of a step on one H200). The GEMV phases run
// on the tensor cores (mma_rows), and every sum runs in another order than one GEMM's, so h differs from the ops' in
// its last bits.
// The default for the steps it fits; VEOMNI_DECODE_LAYER_KERNEL=0 turns it off (decode_layers_clustered.h);
// bench/RESULTS.md has its figures.
#include "kernels/cuda/decode_layers_clustered.h"

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>

#include "kernels/cuda/bulk_copy.cuh"
#include "kernels/cuda/cluster_stores.cuh"
#include "kernels/cuda/decode_layer_run.cuh"
#include "kernels/cuda/flagged_words.cuh"
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/grid_barrier.cuh"  // load_relaxed
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/qkv_norm_rope.cuh"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/skinny_dot.cuh"
#include "kernels/cuda/tensor_map.h"
#include "kernels/overlapped_launches.h"

namespace veomni::ops::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kClusterBlocks = 8;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;
constexpr int kHeadDim = 128;
constexpr int kDimsPerLane = kHeadDim / kWarp;
constexpr int kMaxLayersPerLaunch = 32;
constexpr int kMaxHidden = 1024;  // the norms' gains a thread holds in registers (Gains)
constexpr int kKeysAtOnce = 4;  // a warp's cache rows in flight
// The longest cache it takes: a cluster reads its kv head's keys with 32 rows a block in flight, where the ops' split
// kernel spreads a long cache over the whole GPU; past a few thousand positions the attention would cost more than
// the barriers save.
constexpr int64_t kMaxCacheLen = 2048;

using bf16 = __nv_bfloat16;

struct ClusterArgs {
  bf16* h;  // [1, hidden], updated in place
  // The partial sums, flagged (flagged_words.cuh), in two sets that alternate with the layers: a block may write a
  // layer's sums while another still reads those of the layer before.
  FlaggedWord* o_partial;  // [2, hkv, hidden]: each kv head's share of o_proj's product
  FlaggedWord* mlp_partial;  // [2, clusters, hidden]: each cluster's share of down_proj's product
  unsigned* launches;  // [2]: the blocks that have left this launch, then the launches before it
  const float* cos;
  const float* sin;
  const int32_t* write_rows;  // [1]: the flat cache row of the step's key and value
  const int32_t* cache_rows;  // [2, 1]: the row's slot, then its kv length
  int hidden, hq, hkv, intermediate, batch, cache_len, layers;
  uint32_t x_bytes, y_bytes;  // the two weight buffers' sizes; the scratch area follows them
  int narrow_columns;  // the fewer SwiGLU columns a block takes (mlp_columns); the others take 8 more
  DecodeLayerPointers layer[kMaxLayersPerLaunch];
  // The strided slices' tensor maps: o_proj as [rows][heads][head_dim] with a box of the block's rows of its group's
  // heads; down_proj as [row groups of 64][64 rows][intermediate] with a box of every row of the block's columns
  // (one map a width: a box's size is fixed).
  CUtensorMap o_map[kMaxLayersPerLaunch];
  CUtensorMap down_map[kMaxLayersPerLaunch][2];  // narrow_columns wide, then 8 more
};
static_assert(sizeof(ClusterArgs) <= 32764, "a launch's arguments fit the parameter space (CUDA 12.1 and later)");

// The most rows mma_rows splits over the warps' k ranges: fewer tiles than warps.
constexpr int kMostSplitTiles = kWarps - 1;
constexpr int kSplitRows = kMostSplitTiles * 16;

// The per-block scratch of a head group of kGroup query heads, after the hidden-sized arrays.
template <int kGroup>
struct GroupScratch {
  alignas(16) bf16 qkv[(kGroup + 2) * kHeadDim];  // the group's q/k/v columns (query heads, key, value)
  float head[kWarps][kHeadDim];  // qkv_head_values' per-warp scratch
  float q[kGroup][kHeadDim];  // the normalised, rotated query heads, rounded to bf16
  float new_key[kHeadDim];  // the step's key, normalised, rotated and rounded as the cache holds it
  float new_value[kHeadDim];
  float warp_max[kWarps][kGroup];
  float warp_denominator[kWarps][kGroup];
  union {
    float warp_acc[kWarps][kGroup][kHeadDim];  // attend's, read before it returns
    float mma_partial[kWarps][kSplitRows];  // mma_rows' per-warp partial sums when the warps split the k range
  };
  float block_state[kGroup][kHeadDim + 2];  // the block's sums, max score and denominator (read by the cluster)
  float cluster_state[kClusterBlocks][kGroup][2];  // every block's max score and denominator of each head
  alignas(16) bf16 attention[kGroup * kHeadDim];  // the group's attention output (read in 16-byte chunks)
  float gate_up[128];  // the block's gate sums, then its up sums
  alignas(16) bf16 act[64];  // the block's SwiGLU columns
  float warp_squares[kWarps];  // column_squares' per-warp sums
  float cos[kHeadDim], sin[kHeadDim];  // the step's rotation (one position for every layer of the launch)
  alignas(16) bf16 qk_gains[2][kHeadDim];  // the layer's q and k norm gains (queue_qk_gains)
  float norm_part[kClusterBlocks];  // h's sum of squares over each eighth of its columns (add_partials)
};

// The slice [begin, end) of n items that part p of parts owns (shares differ by one at most).
__host__ __device__ inline int slice_begin(int n, int p, int parts) { return static_cast<int>(int64_t{n} * p / parts); }

// The block's SwiGLU columns: 8-column chunks of the intermediate size split over the grid.
struct Columns {
  int first, count;
};
__host__ __device__ inline Columns mlp_columns(int intermediate, int block, int blocks) {
  const int chunks = intermediate / kChunk;
  const int begin = slice_begin(chunks, block, blocks), end = slice_begin(chunks, block + 1, blocks);
  return {begin * kChunk, (end - begin) * kChunk};
}

// The step's cache rows, the same in every layer: read once a launch (after the kernel before has written them), so
// that no layer waits on their global loads.
struct StepRows {
  int64_t write_row;  // the flat cache row of the step's key and value
  int64_t slot, len;  // the row's slot and its kv length
};

// One block's view of the kernel: its two weight buffers and their barriers, its rank in its cluster and the cluster
// (the kv head it computes attention for, when below hkv), and the step's cache rows; the queue_* members stream its
// next weight slices.
template <int kGroup>
struct Block {
  const ClusterArgs& a;
  unsigned char* x;  // q/k/v or gate|up slice
  unsigned char* y;  // o_proj or down slice
  uint64_t* x_loaded;
  uint64_t* y_loaded;
  int rank, cluster_id;
  StepRows step;  // set once the kernel before has finished
  // The block's SwiGLU columns, the same in every layer: worked out once a launch (mlp_columns' 64-bit divisions
  // were 3.5% of the kernel's instructions in every layer's phases).
  Columns mlp;

  __device__ int g() const { return cluster_id; }

  // Cluster rows r of the group's (query heads, key, value) columns as rows of the layer's q/k/v weight.
  __device__ int64_t qkv_row(int r) const {
    if (r < kGroup * kHeadDim) return int64_t{g()} * kGroup * kHeadDim + r;
    if (r < (kGroup + 1) * kHeadDim) return int64_t{a.hq} * kHeadDim + int64_t{g()} * kHeadDim + r - kGroup * kHeadDim;
    return int64_t{a.hq + a.hkv} * kHeadDim + int64_t{g()} * kHeadDim + r - (kGroup + 1) * kHeadDim;
  }

  // One thread: the block's rows of the group's q/k/v columns into x: its share of each of the three sections (query
  // heads, key, value), each a run of consecutive weight rows. (One copy a run: copying row by row into padded rows,
  // against the GEMV's bank conflicts, kept the issuing warp about 2 us a slice, more than the conflicts cost.)
  __device__ void queue_qkv(int layer) const {
    constexpr int kRows = (kGroup + 2) * kHeadDim / kClusterBlocks;
    const int64_t row_bytes = int64_t{a.hidden} * sizeof(bf16);
    mbarrier_expect_bytes(x_loaded, static_cast<uint32_t>(kRows * row_bytes));
    const int first = rank * kRows, last = first + kRows;
    const int bounds[4] = {0, kGroup * kHeadDim, (kGroup + 1) * kHeadDim, (kGroup + 2) * kHeadDim};
    for (int section = 0; section < 3; ++section) {
      const int begin = max(first, bounds[section]), end = min(last, bounds[section + 1]);
      if (begin >= end) continue;
      bulk_copy_to_shared(x + (begin - first) * row_bytes, a.layer[layer].weight[kQkv] + qkv_row(begin) * a.hidden,
                          static_cast<uint32_t>((end - begin) * row_bytes), x_loaded, l2_evict_first_policy());
    }
  }

  // One thread: the block's gate rows, then its up rows, into x.
  __device__ void queue_gate_up(int layer) const {
    const Columns c = mlp;
    const uint32_t bytes = static_cast<uint32_t>(int64_t{c.count} * a.hidden * sizeof(bf16));
    mbarrier_expect_bytes(x_loaded, 2 * bytes);
    if (bytes == 0) return;
    const bf16* w = a.layer[layer].weight[kGateUp];
    const uint64_t policy = l2_evict_first_policy();
    bulk_copy_to_shared(x, w + int64_t{c.first} * a.hidden, bytes, x_loaded, policy);
    bulk_copy_to_shared(x + bytes, w + (int64_t{a.intermediate} + c.first) * a.hidden, bytes, x_loaded, policy);
  }

  // One thread: the block's o_proj rows (an eighth of the outputs) over the group's heads' inputs into y,
  // [rows, group * head_dim].
  __device__ void queue_o_proj(int layer) const {
    const int rows = a.hidden / kClusterBlocks;
    mbarrier_expect_bytes(y_loaded, static_cast<uint32_t>(rows * kGroup * kHeadDim * sizeof(bf16)));
    tensor_copy_to_shared(y, &a.o_map[layer], 0, g() * kGroup, rank * rows, y_loaded, l2_evict_first_policy());
  }

  // One thread: the block's columns of down_proj (every output row) into y, [hidden, count].
  __device__ void queue_down(int layer) const {
    const Columns c = mlp;
    const uint32_t bytes = static_cast<uint32_t>(int64_t{c.count} * a.hidden * sizeof(bf16));
    mbarrier_expect_bytes(y_loaded, bytes);
    if (bytes != 0)
      tensor_copy_to_shared(y, &a.down_map[layer][c.count == a.narrow_columns ? 0 : 1], c.first, 0, 0, y_loaded,
                            l2_evict_first_policy());
  }
};

// A norm's gains for the elements a thread normalises (i = threadIdx.x + j * kThreads), loaded ahead of the norm so
// that their global round trip is off the layer's critical path. They stay bf16 until the norm: converting them at
// the load would make the thread wait for it there.
struct Gains {
  bf16 value[kMaxHidden / kThreads];
};

__device__ __forceinline__ Gains load_gains(const bf16* gain, int hidden) {
  Gains g;
#pragma unroll
  for (int j = 0; j < kMaxHidden / kThreads; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * kThreads;
    g.value[j] = i < hidden ? gain[i] : bf16{};
  }
  return g;
}

// The sum of h[first + c]^2 over c < columns (at most kThreads), in every thread: per warp, then the warps in order.
template <int kGroup>
__device__ float column_squares(const bf16* h, int first, int columns, GroupScratch<kGroup>& s) {
  const int t = threadIdx.x;
  const float v = t < columns ? __bfloat162float(h[first + t]) : 0.0f;
  const float warp_total = warp_sum(v * v);
  if (t % kWarp == 0) s.warp_squares[t / kWarp] = warp_total;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total += s.warp_squares[w];
  __syncthreads();  // warp_squares is rewritten by the next call
  return total;
}

// xn = RMSNorm(h): rstd from the eight column sums of squares in norm_part (the rstd expression of skinny_dot.cuh's
// row_rstd, whose sums run in another order), then (x * rstd) * gain rounded to bf16.
template <int kGroup>
__device__ void normalise(const bf16* h, const Gains& gain, float eps, int hidden, bf16* xn, GroupScratch<kGroup>& s) {
  float squares = 0.0f;
#pragma unroll
  for (int r = 0; r < kClusterBlocks; ++r) squares += s.norm_part[r];
  const float rstd = static_cast<float>(1.0 / sqrt(static_cast<double>(squares) / hidden + eps));
#pragma unroll
  for (int j = 0; j < kMaxHidden / kThreads; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * kThreads;
    if (i < hidden) xn[i] = __float2bfloat16_rn((__bfloat162float(h[i]) * rstd) * __bfloat162float(gain.value[j]));
  }
  __syncthreads();
}

// D += A (16 x 16 bf16, row-major fragments) B (16 x 8 bf16, column fragments), fp32 accumulation.
__device__ __forceinline__ void mma_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                          uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

// The partial sums of rows 16 t + g and 16 t + g + 8 (g = lane / 4; in the lanes with lane % 4 == 0) of n rows . x
// over chunk steps [step_begin, step_end) of 32 elements, on the tensor cores with x as the one nonzero column of B.
// The order of the elements inside a step does not matter to the sum, so each lane loads 16 contiguous bytes of its
// two rows (and lanes 0-3 of x), which the two mma steps take as their fragments: lane (g, q) holds elements
// 8q .. 8q + 7 of the step, the first mma the pairs (0, 1) and (2, 3), the second (4, 5) and (6, 7). Rows past n read
// row n - 1 (their sums are not used); chunks past k_chunks count as zeros.
// kPairedRows, for rows a multiple of 128 bytes apart: the two rows of each 8-lane load phase (g even, g odd) would
// read the same banks, so the odd rows take step s ^ 1's chunks instead of step s's, against their own copy of x in
// B's column 1 (lanes g == 1), and their sums come from D's column 1: the rows of a phase read the two halves of a
// 128-byte line. Their steps run in pairs (mma_steps).
template <bool kPairedRows>
__device__ __forceinline__ float2 mma_tile(const uint4* rows, int64_t row_chunks, int n, int tile, int k_chunks,
                                           int step_begin, int step_end, const uint4* x, int lane) {
  const int g = lane / 4, q = lane % 4;
  const bool odd = kPairedRows && g % 2 == 1;
  const uint4* low = rows + min(tile * 16 + g, n - 1) * row_chunks;
  const uint4* high = rows + min(tile * 16 + g + 8, n - 1) * row_chunks;
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  // Where every chunk of the steps exists (k_chunks whole steps, or whole pairs of steps with kPairedRows, and the
  // range starts and ends on a pair), the loads need no guard and no zeroed fragments, and every lane loads x (B's
  // columns past the first two are never read): a step takes fewer instructions. Nsight Compute put the guarded
  // loop's samples at 53% fixed-latency waits and 25% issuing, the CS2R that zeroes its fragments among its most
  // executed instructions (bench/RESULTS.md). The mma steps run in the same order, so the sums have the same bits.
  constexpr int kSpan = kPairedRows ? 2 : 1;
  if (k_chunks % (4 * kSpan) == 0 && step_begin % kSpan == 0 && step_end % kSpan == 0) {
    const int first = odd ? 4 : 0, second = odd ? 0 : 4;  // the lane's chunks in a pair's two steps (c + ...)
#pragma unroll 2
    for (int step = step_begin; step < step_end; step += kSpan) {
      const int c = step * 4 + q;
      if constexpr (kPairedRows) {
        const uint4 a0 = low[c + first], b0 = high[c + first], x0 = x[c + first];
        const uint4 a1 = low[c + second], b1 = high[c + second], x1 = x[c + second];
        mma_16816(d, a0.x, b0.x, a0.y, b0.y, x0.x, x0.y);
        mma_16816(d, a0.z, b0.z, a0.w, b0.w, x0.z, x0.w);
        mma_16816(d, a1.x, b1.x, a1.y, b1.y, x1.x, x1.y);
        mma_16816(d, a1.z, b1.z, a1.w, b1.w, x1.z, x1.w);
      } else {
        const uint4 a0 = low[c], b0 = high[c], x0 = x[c];
        mma_16816(d, a0.x, b0.x, a0.y, b0.y, x0.x, x0.y);
        mma_16816(d, a0.z, b0.z, a0.w, b0.w, x0.z, x0.w);
      }
    }
    return odd ? float2{d[1], d[3]} : float2{d[0], d[2]};
  }
#pragma unroll 4
  for (int step = step_begin; step < step_end; ++step) {
    const int c = (odd ? step ^ 1 : step) * 4 + q;  // the row's chunk; lane g < 2 also loads that chunk of x
    uint4 a{}, b{}, xv{};
    if (c < k_chunks) {
      a = low[c];
      b = high[c];
      if (g == 0 || (kPairedRows && g == 1)) xv = x[c];
    }
    mma_16816(d, a.x, b.x, a.y, b.y, xv.x, xv.y);
    mma_16816(d, a.z, b.z, a.w, b.w, xv.z, xv.w);
  }
  return odd ? float2{d[1], d[3]} : float2{d[0], d[2]};
}

// Four 8x8 matrices of bf16 from shared memory, one 16-byte row an address, in mma fragment order (ldmatrix.x4):
// lane l gives the address of row l % 8 of matrix l / 8; r[j] holds lane (g, q)'s elements 2q, 2q + 1 of row g of
// matrix j. ldmatrix_x2 takes two matrices (the addresses of lanes 0-15).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(row))));
#endif
}

__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(row))));
#endif
}

// mma_tile for rows a multiple of 128 bytes apart and whole groups of 8 chunks [group_begin, group_end): the rows'
// fragments come straight from ldmatrix (no register moves, no guards), and each of the tile's 8 row pairs (rows g
// and g + 8) reads its chunks in its own order, chunk ((2m + h) ^ g) of a group for half h of the group's mma m, so
// that the 8 rows of every ldmatrix matrix read 8 different 16-byte columns of the banks. B's column g holds x in
// row pair g's order, so D[g][g] and D[g + 8][g] are the rows' sums: returned in the lanes with lane % 4 == g / 2
// (the others return values of no row). Checked against a plain dot product in an emulation of the fragments.
__device__ __forceinline__ float2 mma_tile_swizzled(const uint4* rows, int64_t row_chunks, int n, int tile,
                                                    int group_begin, int group_end, const uint4* x, int lane) {
  const int j = lane / 8, i = lane % 8;  // the matrix whose row i this lane addresses
  // A: matrices 0 and 2 hold the tile's rows 0-7, 1 and 3 its rows 8-15; 0 and 1 a mma's first 8 elements.
  const uint4* row = rows + min(tile * 16 + (j & 1) * 8 + i, n - 1) * row_chunks;
  const int a_order = (j >> 1) ^ i;
  // B: matrix 0 the first 8 elements, 1 the last 8, row i B's column i (lanes 16-31 repeat lanes 0-15).
  const int b_order = (j & 1) ^ i;
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int group = group_begin; group < group_end; ++group) {
    const uint4* row_group = row + group * 8;
    const uint4* x_group = x + group * 8;
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      uint32_t a[4], b[2];
      ldmatrix_x4(a, row_group + ((2 * m) ^ a_order));
      ldmatrix_x2(b, x_group + ((2 * m) ^ b_order));
      mma_16816(d, a[0], a[1], a[2], a[3], b[0], b[1]);
    }
  }
  return (lane / 4) % 2 == 1 ? float2{d[1], d[3]} : float2{d[0], d[2]};
}

// mma_tile_swizzled for every tile t < tiles (at most kMostSplitTiles) over the same groups: each mma's B fragments
// are loaded once for all the tiles, and the tiles' sums run as independent chains. sums[t] as mma_tile_swizzled
// returns tile t's.
__device__ __forceinline__ void mma_tiles_swizzled(const uint4* rows, int64_t row_chunks, int n, int tiles,
                                                   int group_begin, int group_end, const uint4* x, int lane,
                                                   float2 (&sums)[kMostSplitTiles]) {
  const int j = lane / 8, i = lane % 8;
  const int a_order = (j >> 1) ^ i, b_order = (j & 1) ^ i;
  const uint4* row[kMostSplitTiles];
  float d[kMostSplitTiles][4];
#pragma unroll
  for (int t = 0; t < kMostSplitTiles; ++t) {
    row[t] = rows + min(t * 16 + (j & 1) * 8 + i, n - 1) * row_chunks;
    d[t][0] = d[t][1] = d[t][2] = d[t][3] = 0.0f;
  }
  for (int group = group_begin; group < group_end; ++group) {
    const uint4* x_group = x + group * 8;
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      uint32_t b[2];
      ldmatrix_x2(b, x_group + ((2 * m) ^ b_order));
#pragma unroll
      for (int t = 0; t < kMostSplitTiles; ++t) {
        if (t >= tiles) break;
        uint32_t a[4];
        ldmatrix_x4(a, row[t] + group * 8 + ((2 * m) ^ a_order));
        mma_16816(d[t], a[0], a[1], a[2], a[3], b[0], b[1]);
      }
    }
  }
  const bool odd = (lane / 4) % 2 == 1;
#pragma unroll
  for (int t = 0; t < kMostSplitTiles; ++t) sums[t] = odd ? float2{d[t][1], d[t][3]} : float2{d[t][0], d[t][2]};
}

// The steps of 4 chunks that cover k_chunks (in pairs with kPairedRows: step s ^ 1 must exist for every step s).
template <bool kPairedRows>
__device__ __forceinline__ int mma_steps(int k_chunks) {
  return kPairedRows ? (k_chunks + 7) / 8 * 2 : (k_chunks + 3) / 4;
}

// emit(r, row r . x) for n rows of k_chunks 16-byte chunks (row r at rows + r * row_chunks) against x, in 16-row
// tiles on the tensor cores. With at least as many tiles as warps, warp w takes tiles w, w + 8, ...; with fewer, the
// warps split the k range and their partial sums are added in warp order (through `partial`), every thread emitting
// rows: over whole groups of 8 chunks each warp takes every tile over an eighth of the groups (mma_tiles_swizzled,
// x's fragments loaded once for all the tiles), otherwise the tiles' steps. kPairedRows: see mma_tile (for rows a
// multiple of 128 bytes apart).
template <bool kPairedRows, class Emit>
__device__ void mma_rows(const uint4* rows, int64_t row_chunks, int n, int k_chunks, const uint4* x,
                         float (*partial)[kSplitRows], Emit&& emit) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (n == 0) return;
  // Whole groups of 8 chunks over rows a multiple of 128 bytes apart take mma_tile_swizzled, in groups; the rest
  // mma_tile, in steps of 4 chunks.
  const bool swizzled = kPairedRows && k_chunks % 8 == 0;
  const int tiles = (n + 15) / 16, steps = swizzled ? k_chunks / 8 : mma_steps<kPairedRows>(k_chunks);
  const bool holds = swizzled ? lane % 4 == lane / 8 : lane % 4 == 0;  // the lane holds its rows' sums
  auto tile_sums = [&](int t, int begin, int end) {
    return swizzled ? mma_tile_swizzled(rows, row_chunks, n, t, begin, end, x, lane)
                    : mma_tile<kPairedRows>(rows, row_chunks, n, t, k_chunks, begin, end, x, lane);
  };
  if (tiles >= kWarps) {
    // Two tiles at once, both summed before either is emitted: the second tile's loads need not wait for the first
    // tile's stores (emit writes shared memory, which the compiler cannot tell from the rows).
    auto emit_tile = [&](int t, float2 sums) {
      const int r = t * 16 + lane / 4;
      if (holds && r < n) emit(r, sums.x);
      if (holds && r + 8 < n) emit(r + 8, sums.y);
    };
    for (int t = warp; t < tiles; t += 2 * kWarps) {
      const int next = t + kWarps;
      const float2 first = tile_sums(t, 0, steps);
      const float2 second = next < tiles ? tile_sums(next, 0, steps) : float2{};
      emit_tile(t, first);
      if (next < tiles) emit_tile(next, second);
    }
    return;
  }
  if (swizzled) {
    // Every warp takes every tile over its eighth of the groups; the eight partial sums are added in warp order.
    const int per = (steps + kWarps - 1) / kWarps;
    float2 sums[kMostSplitTiles];
    mma_tiles_swizzled(rows, row_chunks, n, tiles, min(steps, warp * per), min(steps, (warp + 1) * per), x, lane,
                       sums);
    if (holds) {
#pragma unroll
      for (int t = 0; t < kMostSplitTiles; ++t) {
        if (t >= tiles) break;
        partial[warp][t * 16 + lane / 4] = sums[t].x;
        partial[warp][t * 16 + lane / 4 + 8] = sums[t].y;
      }
    }
    __syncthreads();
    for (int r = threadIdx.x; r < n; r += kThreads) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += partial[w][r];
      emit(r, sum);
    }
    __syncthreads();  // partial is rewritten by the next call
    return;
  }
  const int splits = kWarps / tiles, split = warp / tiles, per = (steps + splits - 1) / splits;
  float2 sums{0.0f, 0.0f};
  if (split < splits) sums = tile_sums(warp % tiles, split * per, min(steps, (split + 1) * per));
  if (holds) {
    partial[warp][lane / 4] = sums.x;
    partial[warp][lane / 4 + 8] = sums.y;
  }
  __syncthreads();
  for (int r = threadIdx.x; r < n; r += kThreads) {
    float sum = 0.0f;
    for (int sp = 0; sp < splits; ++sp) sum += partial[sp * tiles + r / 16][r % 16];
    emit(r, sum);
  }
  __syncthreads();  // partial is rewritten by the next call
}

// Copies `bytes` (a multiple of 16) of the block's shared memory at `local` to the same place in the cluster's other
// blocks, in 16-byte stores: a few wide remote stores drain faster ahead of the cluster barrier than many narrow ones.
__device__ __forceinline__ void push_to_cluster(const void* local, int bytes, int own_rank,
                                                cg::cluster_group& cluster) {
  const int pieces = bytes / 16;
  for (int t = threadIdx.x; t < (kClusterBlocks - 1) * pieces; t += kThreads) {
    const int other = t / pieces, piece = t % pieces;
    const int rank = other < own_rank ? other : other + 1;
    const uint4* from = static_cast<const uint4*>(local) + piece;
    *cluster.map_shared_rank(const_cast<uint4*>(from), rank) = *from;
  }
}

// The block's q/k/v columns, stored into every block of the cluster; each receiver's qkv_in phase completes with the
// other seven blocks' bytes (kQkvBytesIn).
template <int kGroup>
__device__ void qkv_phase(const Block<kGroup>& b, const bf16* xn, GroupScratch<kGroup>& s, uint64_t* qkv_in,
                          cg::cluster_group& cluster) {
  constexpr int kRows = (kGroup + 2) * kHeadDim / kClusterBlocks;
  static_assert(kRows * sizeof(bf16) % 16 == 0, "a block's q/k/v columns are whole 16-byte pieces");
  const int chunks = b.a.hidden / kChunk;
  // Rows of hidden bf16 (a multiple of 64): a multiple of 128 bytes apart.
  mma_rows<true>(reinterpret_cast<const uint4*>(b.x), chunks, kRows, chunks, reinterpret_cast<const uint4*>(xn),
                 s.mma_partial, [&](int r, float sum) { s.qkv[b.rank * kRows + r] = __float2bfloat16_rn(sum); });
  __syncthreads();
  constexpr int kPieces = kRows * sizeof(bf16) / 16;
  const uint4* own = reinterpret_cast<const uint4*>(s.qkv + b.rank * kRows);
  for (int t = threadIdx.x; t < (kClusterBlocks - 1) * kPieces; t += kThreads) {
    const int other = t / kPieces;
    store_to_cluster_block(own + t % kPieces, qkv_in, other < b.rank ? other : other + 1, cluster);
  }
}

// The bytes of the other seven blocks' q/k/v columns that complete a block's qkv_in phase.
template <int kGroup>
constexpr uint32_t kQkvBytesIn = (kClusterBlocks - 1) * (kGroup + 2) * kHeadDim / kClusterBlocks * sizeof(bf16);

// Threads of the first warp: the layer's q and k norm gains into qk_gains through async copies, ahead of
// prepare_heads (which reads them after cp.async.wait_all and a barrier), so that their loads are off its path.
template <int kGroup>
__device__ __forceinline__ void queue_qk_gains(const DecodeLayerPointers& l, GroupScratch<kGroup>& s) {
  constexpr int kPieces = kHeadDim * sizeof(bf16) / 16;  // 16-byte pieces of one norm's gains
  const int t = threadIdx.x;
  if (t < 2 * kPieces) {
    const int piece = (t % kPieces) * kChunk;
    const bf16* from = (t < kPieces ? l.q_norm : l.k_norm) + piece;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(shared_address(&s.qk_gains[t / kPieces][piece])),
                 "l"(from)
                 : "memory");
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
}

__device__ __forceinline__ void wait_async_copies() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// The step's query heads and key, normalised and rotated (qkv_norm_rope_cache_write's values), and its value; the
// key and value go into the cache from block 0 of the cluster.
template <int kGroup>
__device__ void prepare_heads(const Block<kGroup>& b, const DecodeLayerPointers& l, GroupScratch<kGroup>& s) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  QkvNormRopeArgs rope{};
  rope.qkv = ConstFloats{s.qkv, true};
  rope.q_norm = ConstFloats{s.qk_gains[0], true};
  rope.k_norm = ConstFloats{s.qk_gains[1], true};
  rope.cos = s.cos;
  rope.sin = s.sin;
  rope.hq = kGroup;  // the group's columns as one token of kGroup query heads and one kv head
  rope.hkv = 1;
  rope.d = kHeadDim;
  rope.eps = l.qk_eps;
  if (warp < kGroup + 2) {
    qkv_head_values<kHeadDim>(rope, 0, warp, s.head[warp], lane, [&](int64_t i, float x) {
      const float v = packed::as_float(packed::rounded<bf16>(x));  // as q and the cache hold it
      if (warp < kGroup) s.q[warp][i] = v;
      else if (warp == kGroup) s.new_key[i] = v;
      else s.new_value[i] = v;
    });
  }
  __syncthreads();
  const int64_t dest = b.step.write_row;
  if (b.rank == 0 && dest >= 0 && dest < int64_t{b.a.batch} * b.a.cache_len) {
    const int64_t at = (dest * b.a.hkv + b.g()) * kHeadDim;
    for (int i = threadIdx.x; i < kHeadDim; i += kThreads) {
      l.k_cache[at + i] = __float2bfloat16_rn(s.new_key[i]);
      l.v_cache[at + i] = __float2bfloat16_rn(s.new_value[i]);
    }
  }
}

// The row's slot and the block's eighth [begin, end) of its keys (empty for a row outside the cache).
struct KeyRange {
  int64_t slot, begin, end;
};

template <int kGroup>
__device__ __forceinline__ KeyRange key_range(const Block<kGroup>& b) {
  const int64_t slot = b.step.slot, len = b.step.len;
  const bool valid = slot >= 0 && slot < b.a.batch && len >= 1 && len <= b.a.cache_len;
  const int64_t per_block = valid ? (len + kClusterBlocks - 1) / kClusterBlocks : 0;
  const int64_t begin = b.rank * per_block;
  return {slot, begin, valid ? min(len, begin + per_block) : 0};
}

// Asks the L2 cache for the block's cache rows of its kv head (keys and values, 128-byte lines) ahead of the
// attention phase, whose loads then wait on L2 instead of HBM.
template <int kGroup>
__device__ void prefetch_keys(const Block<kGroup>& b, const DecodeLayerPointers& l) {
  constexpr int kLines = kHeadDim * sizeof(bf16) / 128;  // a head's lines in a cache row
  const KeyRange keys = key_range(b);
  const int64_t rows = keys.end - keys.begin, stride = int64_t{b.a.hkv} * kHeadDim;
  for (int64_t i = threadIdx.x; i < 2 * kLines * rows; i += kThreads) {
    const int64_t row = keys.begin + i / (2 * kLines), line = i % kLines;
    const bf16* cache = (i / kLines) % 2 == 0 ? l.k_cache : l.v_cache;
    const bf16* p = cache + (keys.slot * b.a.cache_len + row) * stride + b.g() * kHeadDim + line * (128 / sizeof(bf16));
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
  }
}

// A warp's kKeysAtOnce cache rows j0 + u * kWarps of its kv head, keys and values as stored (the lane's dims); rows
// at or past the block's end are zeros. Loaded ahead of the attention by the first batch (first_key_batch), converted
// where they are used: the loads' round trip overlaps what runs in between.
struct KeyBatch {
  uint2 key[kKeysAtOnce], value[kKeysAtOnce];
};

template <int kGroup>
__device__ __forceinline__ KeyBatch load_key_batch(const Block<kGroup>& b, const DecodeLayerPointers& l,
                                                   const KeyRange& keys, int64_t j0) {
  const int lane = threadIdx.x % kWarp;
  const int64_t stride = int64_t{b.a.hkv} * kHeadDim, row0 = keys.slot * b.a.cache_len;
  const bf16* k = l.k_cache + b.g() * kHeadDim + lane * kDimsPerLane;
  const bf16* v = l.v_cache + b.g() * kHeadDim + lane * kDimsPerLane;
  KeyBatch batch;
#pragma unroll
  for (int u = 0; u < kKeysAtOnce; ++u) {
    const int64_t j = j0 + u * kWarps;
    batch.key[u] = batch.value[u] = uint2{0u, 0u};
    if (j < keys.end) {
      batch.key[u] = *reinterpret_cast<const uint2*>(k + (row0 + j) * stride);
      batch.value[u] = *reinterpret_cast<const uint2*>(v + (row0 + j) * stride);
    }
  }
  return batch;
}

// The warp's first batch of the block's keys (attend takes it).
template <int kGroup>
__device__ __forceinline__ KeyBatch first_key_batch(const Block<kGroup>& b, const DecodeLayerPointers& l) {
  const KeyRange range = key_range(b);
  return load_key_batch(b, l, range, range.begin + threadIdx.x / kWarp);
}

// The block's eighth of the row's keys: each warp's running softmax over its keys, merged into block_state; `first`
// is the warp's first batch (first_key_batch), loaded before the step's own key was written.
template <int kGroup>
__device__ void attend(const Block<kGroup>& b, const DecodeLayerPointers& l, GroupScratch<kGroup>& s,
                       const KeyBatch& first) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const KeyRange range = key_range(b);
  const int64_t begin = range.begin, end = range.end;
  const int64_t dest = b.step.write_row, row0 = range.slot * b.a.cache_len;
  float q[kGroup][kDimsPerLane], acc[kGroup][kDimsPerLane], max_score[kGroup], denominator[kGroup];
  for (int h = 0; h < kGroup; ++h) {
    for (int i = 0; i < kDimsPerLane; ++i) {
      q[h][i] = s.q[h][lane * kDimsPerLane + i] * l.scale;
      acc[h][i] = 0.0f;
    }
    max_score[h] = -INFINITY;
    denominator[h] = 0.0f;
  }
  for (int64_t j0 = begin + warp; j0 < end; j0 += kWarps * kKeysAtOnce) {
    const KeyBatch batch = j0 == begin + warp ? first : load_key_batch(b, l, range, j0);
    float keys[kKeysAtOnce][kDimsPerLane], values[kKeysAtOnce][kDimsPerLane];
#pragma unroll
    for (int u = 0; u < kKeysAtOnce; ++u) {
      const int64_t j = j0 + u * kWarps;
      if (j >= end) {
        for (int i = 0; i < kDimsPerLane; ++i) keys[u][i] = values[u][i] = 0.0f;
      } else if (row0 + j == dest) {  // the step's own key: written by block 0, maybe not yet
        for (int i = 0; i < kDimsPerLane; ++i) {
          keys[u][i] = s.new_key[lane * kDimsPerLane + i];
          values[u][i] = s.new_value[lane * kDimsPerLane + i];
        }
      } else {
        const __nv_bfloat162* kp = reinterpret_cast<const __nv_bfloat162*>(&batch.key[u]);
        const __nv_bfloat162* vp = reinterpret_cast<const __nv_bfloat162*>(&batch.value[u]);
        for (int i = 0; i < kDimsPerLane / 2; ++i) {
          keys[u][2 * i] = __low2float(kp[i]);
          keys[u][2 * i + 1] = __high2float(kp[i]);
          values[u][2 * i] = __low2float(vp[i]);
          values[u][2 * i + 1] = __high2float(vp[i]);
        }
      }
    }
#pragma unroll
    for (int h = 0; h < kGroup; ++h) {
      float score[kKeysAtOnce];
      float new_max = max_score[h];
#pragma unroll
      for (int u = 0; u < kKeysAtOnce; ++u) {
        float dot = 0.0f;
        for (int i = 0; i < kDimsPerLane; ++i) dot += q[h][i] * keys[u][i];
        score[u] = j0 + u * kWarps < end ? warp_sum(dot) : -INFINITY;
        new_max = fmaxf(new_max, score[u]);
      }
      const float rescale = __expf(max_score[h] - new_max);
      denominator[h] *= rescale;
      for (int i = 0; i < kDimsPerLane; ++i) acc[h][i] *= rescale;
#pragma unroll
      for (int u = 0; u < kKeysAtOnce; ++u) {
        const float p = __expf(score[u] - new_max);
        denominator[h] += p;
        for (int i = 0; i < kDimsPerLane; ++i) acc[h][i] += p * values[u][i];
      }
      max_score[h] = new_max;
    }
  }
  for (int h = 0; h < kGroup; ++h) {
    if (lane == 0) {
      s.warp_max[warp][h] = max_score[h];
      s.warp_denominator[warp][h] = denominator[h];
    }
    for (int i = 0; i < kDimsPerLane; ++i) s.warp_acc[warp][h][lane * kDimsPerLane + i] = acc[h][i];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kGroup * kHeadDim; i += kThreads) {
    const int h = i / kHeadDim, dim = i % kHeadDim;
    float total_max = -INFINITY;
    for (int w = 0; w < kWarps; ++w) total_max = fmaxf(total_max, s.warp_max[w][h]);
    float total_denominator = 0.0f, sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float weight = s.warp_max[w][h] == -INFINITY ? 0.0f : __expf(s.warp_max[w][h] - total_max);
      total_denominator += s.warp_denominator[w][h] * weight;
      sum += s.warp_acc[w][h][dim] * weight;
    }
    s.block_state[h][dim] = sum;
    if (dim == 0) {
      s.block_state[h][kHeadDim] = total_max;
      s.block_state[h][kHeadDim + 1] = total_denominator;
    }
  }
}

// The group's attention output from the eight blocks' states (every block merges, in rank order); NaN for a row
// outside the cache.
template <int kGroup>
__device__ void merge_blocks(const Block<kGroup>& b, GroupScratch<kGroup>& s, cg::cluster_group& cluster) {
  const int64_t slot = b.step.slot, len = b.step.len;
  const bool valid = slot >= 0 && slot < b.a.batch && len >= 1 && len <= b.a.cache_len;
  for (int t = threadIdx.x; t < kClusterBlocks * kGroup * 2; t += kThreads) {  // each remote max and denominator once
    const int r = t / (kGroup * 2), h = t / 2 % kGroup, which = t % 2;
    s.cluster_state[r][h][which] = *cluster.map_shared_rank(&s.block_state[h][kHeadDim + which], r);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kGroup * kHeadDim; i += kThreads) {
    const int h = i / kHeadDim, dim = i % kHeadDim;
    float max_score[kClusterBlocks], denominator[kClusterBlocks], value[kClusterBlocks];
#pragma unroll
    for (int r = 0; r < kClusterBlocks; ++r) {
      max_score[r] = s.cluster_state[r][h][0];
      denominator[r] = s.cluster_state[r][h][1];
      value[r] = *cluster.map_shared_rank(&s.block_state[h][dim], r);
    }
    float total_max = -INFINITY;
    for (int r = 0; r < kClusterBlocks; ++r) total_max = fmaxf(total_max, max_score[r]);
    float total_denominator = 0.0f, sum = 0.0f;
    for (int r = 0; r < kClusterBlocks; ++r) {
      const float weight = max_score[r] == -INFINITY ? 0.0f : __expf(max_score[r] - total_max);
      total_denominator += denominator[r] * weight;
      sum += value[r] * weight;
    }
    s.attention[i] = __float2bfloat16_rn(valid ? sum / total_denominator : NAN);
  }
  __syncthreads();
}

// The two exchanges of a layer's partial sums.
enum Exchange { kOProjSums = 0, kDownSums = 1 };

// The flag of a layer's exchange in the launch-th launch: never zero, and distinct over the exchanges of 2^25
// launches (a launch has at most 64); the words of the launch before carry older flags.
__device__ __forceinline__ unsigned exchange_flag(unsigned launch, int layer, Exchange exchange) {
  return (launch << 7) + static_cast<unsigned>(layer * 2 + exchange) + 1u;
}

// The set of flagged words a layer's exchange writes: [parts, hidden], the sets of odd and even layers alternating.
__device__ __forceinline__ FlaggedWord* exchange_words(FlaggedWord* words, int parts, int hidden, int layer) {
  return words + int64_t{layer % 2} * parts * hidden;
}

// The group's heads' contribution to the block's eighth of o_proj's outputs, flagged.
template <int kGroup>
__device__ void o_proj_phase(const Block<kGroup>& b, GroupScratch<kGroup>& s, FlaggedWord* o_words, unsigned flag) {
  constexpr int kChunks = kGroup * kHeadDim / kChunk;
  const int rows = b.a.hidden / kClusterBlocks;
  FlaggedWord* out = o_words + int64_t{b.g()} * b.a.hidden + b.rank * rows;
  const uint4* input = reinterpret_cast<const uint4*>(s.attention);
  // Rows of group * head_dim bf16: a multiple of 128 bytes apart.
  mma_rows<true>(reinterpret_cast<const uint4*>(b.y), kChunks, rows, kChunks, input, s.mma_partial,
                 [&](int r, float sum) { store_flagged(out + r, sum, flag); });
}

// The sum over parts of words[p * hidden + i] once each carries `flag`, in ascending p; the loads of up to
// kPartsAtOnce parts go out at once, and those not yet written are loaded again after a short sleep (the blocks that
// wait longest, those without attention, then load less often while the others attend).
constexpr int kPartsAtOnce = 16;
constexpr int kMostPolls = 1 << 24;  // each 20 ns and a round trip to L2 or more apart: seconds
__device__ __forceinline__ float sum_of_parts(const FlaggedWord* words, int parts, int hidden, int i, unsigned flag) {
  float sum = 0.0f;
  for (int first = 0; first < parts; first += kPartsAtOnce) {
    FlaggedWord word[kPartsAtOnce];
#pragma unroll
    for (int p = 0; p < kPartsAtOnce; ++p)
      if (first + p < parts) word[p] = load_flagged(words + int64_t{first + p} * hidden + i);
    for (int polls = 0;; ++polls) {
      bool written = true;
#pragma unroll
      for (int p = 0; p < kPartsAtOnce; ++p)
        if (first + p < parts && flag_of(word[p]) != flag) written = false;
      if (written) break;
      // A sum still missing after seconds will never come (a block that is not resident, or a flag gone wrong): the
      // launch fails with an error instead of hanging.
      if (polls == kMostPolls) __trap();
      __nanosleep(20);  // 100 ns cost the 0.6B shape's batch-1 decode about 0.5% on one H200 (bench/RESULTS.md)
#pragma unroll
      for (int p = 0; p < kPartsAtOnce; ++p)
        if (first + p < parts && flag_of(word[p]) != flag)
          word[p] = load_flagged(words + int64_t{first + p} * hidden + i);
    }
#pragma unroll
    for (int p = 0; p < kPartsAtOnce; ++p)
      if (first + p < parts) sum += value_of(word[p]);
  }
  return sum;
}

// h[i] = h[i] + the parts' partial sums of column i, for the block's eighth of the columns, into every block of the
// cluster, with their sum of squares into every block's norm_part (the next norm's statistics): each cluster computes
// the same values in the same order. Without `stored_in` they go out as plain remote stores, for a cluster barrier to
// publish; with it as stores that complete on the receivers' stored_in (added_bytes_in bytes a phase), and the block's
// own share is published to the block before it returns. Not inlined: its two calls a layer share one copy of its
// code (11 KB of the kernel's 169 KB), and the 0.6B shape decodes about 2% faster so on one H200 (bench/RESULTS.md);
// other phases out of line as well made it slower.
template <int kGroup>
__device__ __noinline__ void add_partials(const Block<kGroup>& b, const FlaggedWord* words, int parts, unsigned flag,
                                          bf16* h, GroupScratch<kGroup>& s, cg::cluster_group& cluster,
                                          uint64_t* stored_in = nullptr) {
  const int columns = b.a.hidden / kClusterBlocks;  // a multiple of 8 (dense_decode_layers_clustered_fits)
  for (int c = threadIdx.x; c < columns; c += kThreads) {
    const int i = b.rank * columns + c;
    const float sum = sum_of_parts(words, parts, b.a.hidden, i, flag);
    h[i] = __float2bfloat16_rn(__bfloat162float(h[i]) + sum);
  }
  // column_squares' syncs also order the writes above before the push.
  const float squares = column_squares(h, b.rank * columns, columns, s);
  if (stored_in == nullptr) {
    if (threadIdx.x < kClusterBlocks) *cluster.map_shared_rank(&s.norm_part[b.rank], threadIdx.x) = squares;
    push_to_cluster(h + b.rank * columns, columns * static_cast<int>(sizeof(bf16)), b.rank, cluster);
    return;
  }
  const int pieces = columns * static_cast<int>(sizeof(bf16)) / 16;
  const uint4* own = reinterpret_cast<const uint4*>(h + b.rank * columns);
  for (int t = threadIdx.x; t < (kClusterBlocks - 1) * (pieces + 1); t += kThreads) {
    const int other = t / (pieces + 1), piece = t % (pieces + 1);
    const int rank = other < b.rank ? other : other + 1;
    if (piece < pieces)
      store_to_cluster_block(own + piece, stored_in, rank, cluster);
    else
      store_to_cluster_block(squares, &s.norm_part[b.rank], stored_in, rank, cluster);
  }
  if (threadIdx.x == 0) s.norm_part[b.rank] = squares;
  __syncthreads();
}

// The bytes of the other seven blocks' columns of h and sums of squares that complete a block's phase of add_partials'
// stored_in.
__device__ __forceinline__ uint32_t added_bytes_in(int hidden) {
  return (kClusterBlocks - 1) * (hidden / kClusterBlocks * sizeof(bf16) + sizeof(float));
}

// The block's contributions to the other blocks' eighths of down_proj's outputs, stored into their down_in (row
// `rank`, [kClusterBlocks, hidden / 8]); each receiver's down_in_bar phase completes with the other seven blocks'
// bytes (down_bytes_in), instead of a cluster barrier before reading them from the blocks' shared memory.
template <int kGroup>
__device__ void push_down_partial(const Block<kGroup>& b, const float* down_partial, float* down_in,
                                  uint64_t* down_in_bar, cg::cluster_group& cluster) {
  const int columns = b.a.hidden / kClusterBlocks;  // a multiple of 8: whole 16-byte pieces
  const int pieces = columns * static_cast<int>(sizeof(float)) / 16;
  for (int t = threadIdx.x; t < (kClusterBlocks - 1) * pieces; t += kThreads) {
    const int other = t / pieces, piece = t % pieces;
    const int rank = other < b.rank ? other : other + 1;
    const uint4 value = reinterpret_cast<const uint4*>(down_partial + rank * columns)[piece];
    store_to_cluster_block(value, reinterpret_cast<uint4*>(down_in + b.rank * columns) + piece, down_in_bar, rank,
                           cluster);
  }
}

// The bytes of the other seven blocks' contributions that complete a block's down_in_bar phase.
__device__ __forceinline__ uint32_t down_bytes_in(int hidden) {
  return (kClusterBlocks - 1) * (hidden / kClusterBlocks * sizeof(float));
}

// The cluster's eight contributions to down_proj (the block's own and the seven in down_in), summed in rank order,
// for the block's eighth of the columns, into the cluster's row of the layer's flagged down sums.
template <int kGroup>
__device__ void cluster_down_sum(const Block<kGroup>& b, const float* down_partial, const float* down_in,
                                 FlaggedWord* mlp_words, unsigned flag) {
  const int columns = b.a.hidden / kClusterBlocks;
  for (int c = threadIdx.x; c < columns; c += kThreads) {
    const int i = b.rank * columns + c;
    float value[kClusterBlocks];
#pragma unroll
    for (int r = 0; r < kClusterBlocks; ++r) value[r] = r == b.rank ? down_partial[i] : down_in[r * columns + c];
    float sum = 0.0f;
#pragma unroll
    for (int r = 0; r < kClusterBlocks; ++r) sum += value[r];
    store_flagged(mlp_words + int64_t{b.cluster_id} * b.a.hidden + i, sum, flag);
  }
}

// The block's SwiGLU columns (gate rows, then up rows in x): warp w takes columns w, w + 8, ..., two at a time.
template <int kGroup>
__device__ void swiglu_phase(const Block<kGroup>& b, const bf16* xn, GroupScratch<kGroup>& s) {
  const Columns c = b.mlp;
  const int chunks = b.a.hidden / kChunk;
  mma_rows<true>(reinterpret_cast<const uint4*>(b.x), chunks, 2 * c.count, chunks, reinterpret_cast<const uint4*>(xn),
                 s.mma_partial, [&](int r, float sum) { s.gate_up[r] = sum; });
  __syncthreads();
  for (int j = threadIdx.x; j < c.count; j += kThreads) s.act[j] = swiglu_result(s.gate_up[j], s.gate_up[c.count + j]);
  __syncthreads();
}

// emit(r, row r . x) for n rows of row_chunks <= 4 16-byte chunks (one mma step of mma_tile<false>, the same mma
// steps and so the same bits), warp w taking tiles w, w + 8, ...: the rows of kTilesAtOnce tiles are loaded before any
// of their mma, so that a warp waits for its loads once a batch rather than once a pair of tiles (mma_rows' loop,
// whose emits to shared memory keep the compiler from moving the next tiles' loads above them).
template <class Emit>
__device__ __forceinline__ void mma_short_rows(const uint4* rows, int row_chunks, int n, const uint4* x, Emit&& emit) {
  constexpr int kTilesAtOnce = 4;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int g = lane / 4, q = lane % 4;
  const bool loads = q < row_chunks;
  const uint4 xv = loads ? x[q] : uint4{};
  const int tiles = (n + 15) / 16;
  for (int first = warp; first < tiles; first += kTilesAtOnce * kWarps) {
    uint4 low[kTilesAtOnce], high[kTilesAtOnce];
#pragma unroll
    for (int u = 0; u < kTilesAtOnce; ++u) {
      const int t = first + u * kWarps;
      low[u] = high[u] = uint4{};
      if (loads && t < tiles) {
        low[u] = rows[min(t * 16 + g, n - 1) * row_chunks + q];
        high[u] = rows[min(t * 16 + g + 8, n - 1) * row_chunks + q];
      }
    }
    float2 sums[kTilesAtOnce];
#pragma unroll
    for (int u = 0; u < kTilesAtOnce; ++u) {
      float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      mma_16816(d, low[u].x, high[u].x, low[u].y, high[u].y, xv.x, xv.y);
      mma_16816(d, low[u].z, high[u].z, low[u].w, high[u].w, xv.z, xv.w);
      sums[u] = float2{d[0], d[2]};
    }
    if (q != 0) continue;
#pragma unroll
    for (int u = 0; u < kTilesAtOnce; ++u) {
      const int r = (first + u * kWarps) * 16 + g;
      if (r < n) emit(r, sums[u].x);
      if (r + 8 < n) emit(r + 8, sums[u].y);
    }
  }
}

// The block's columns' contribution to every output of down_proj, into down_partial.
template <int kGroup>
__device__ void down_phase(const Block<kGroup>& b, GroupScratch<kGroup>& s, float* down_partial) {
  const Columns c = b.mlp;
  const int chunks = c.count / kChunk;
  if (chunks == 0) {
    for (int r = threadIdx.x; r < b.a.hidden; r += kThreads) down_partial[r] = 0.0f;
    return;
  }
  // Rows of 24-64 bytes: two rows of a load phase fall into different banks already.
  if (chunks <= 4) {
    mma_short_rows(reinterpret_cast<const uint4*>(b.y), chunks, b.a.hidden, reinterpret_cast<const uint4*>(s.act),
                   [&](int r, float sum) { down_partial[r] = sum; });
    return;
  }
  mma_rows<false>(reinterpret_cast<const uint4*>(b.y), chunks, b.a.hidden, chunks,
                  reinterpret_cast<const uint4*>(s.act), s.mma_partial,
                  [&](int r, float sum) { down_partial[r] = sum; });
}

// The block's exit: the last block out counts the launch (the next launch's flags) and sets the count of blocks back
// to zero. The next launch reads the counts once this one has ended (griddepcontrol.wait, or the stream's order).
__device__ __forceinline__ void count_launch_exit(unsigned* launches) {
  if (threadIdx.x == 0 && atomicAdd(&launches[0], 1u) == gridDim.x - 1) {
    launches[0] = 0;
    launches[1] += 1;
  }
}

template <int kGroup>
__global__ void __launch_bounds__(kThreads, 1) clustered_layers_kernel(const __grid_constant__ ClusterArgs a) {
  extern __shared__ __align__(128) unsigned char shared[];
  __shared__ uint64_t x_loaded, y_loaded, qkv_in, o_sums_in, down_in_bar;
  cg::cluster_group cluster = cg::this_cluster();
  Block<kGroup> b{a,
                  shared,
                  shared + a.x_bytes,
                  &x_loaded,
                  &y_loaded,
                  static_cast<int>(cluster.block_rank()),
                  static_cast<int>(blockIdx.x) / kClusterBlocks,
                  StepRows{},
                  mlp_columns(a.intermediate, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x))};
  unsigned char* scratch = shared + a.x_bytes + a.y_bytes;
  bf16* h = reinterpret_cast<bf16*>(scratch);
  bf16* xn = reinterpret_cast<bf16*>(scratch + ((a.hidden * sizeof(bf16) + 15) / 16) * 16);
  float* down_partial = reinterpret_cast<float*>(xn + ((a.hidden + 7) / 8) * 8);
  float* down_in = down_partial + a.hidden;  // the other blocks' contributions to the block's eighth of the outputs
  auto& s = *reinterpret_cast<GroupScratch<kGroup>*>(down_in + a.hidden);
  const bool attends = b.cluster_id < a.hkv;  // a head group's cluster; the others join from the gate|up phase on
  const int clusters = static_cast<int>(gridDim.x) / kClusterBlocks;

  if (threadIdx.x == 0) {
    mbarrier_init(&x_loaded);
    mbarrier_init(&y_loaded);
    mbarrier_init(&qkv_in);
    mbarrier_init(&o_sums_in);
    mbarrier_init(&down_in_bar);
  }
  __syncthreads();
  // The weights are not written by the kernels before: their copies start before waiting for those.
  if (threadIdx.x == 0) {
    attends ? b.queue_qkv(0) : b.queue_gate_up(0);
    attends ? b.queue_o_proj(0) : b.queue_down(0);
  }
  let_next_kernel_launch();
  wait_for_previous_kernel();
  const unsigned launch = load_relaxed(a.launches + 1);  // counted by the launch before, which has ended
  b.step = StepRows{a.write_rows[0], a.cache_rows[0], a.cache_rows[1]};
  for (int i = threadIdx.x; i < a.hidden; i += kThreads) h[i] = a.h[i];
  for (int i = threadIdx.x; i < kHeadDim; i += kThreads) {  // written by the kernel before (the rope tables)
    s.cos[i] = a.cos[i];
    s.sin[i] = a.sin[i];
  }
  __syncthreads();
  {
    // The first norm's column sums, as add_partials computes them later (each block all eight, the same bits).
    const int columns = a.hidden / kClusterBlocks;
    for (int r = 0; r < kClusterBlocks; ++r) {
      const float squares = column_squares(h, r * columns, columns, s);
      if (threadIdx.x == 0) s.norm_part[r] = squares;
    }
  }
  cluster.sync();  // every block of the cluster has started before any writes into another's shared memory

  uint32_t x_phase = 0, y_phase = 0, qkv_phase_count = 0, o_sums_phase = 0, down_in_phase = 0;
  Gains input_gains = load_gains(a.layer[0].input_norm, a.hidden);
  for (int layer = 0; layer < a.layers; ++layer) {
    const DecodeLayerPointers& l = a.layer[layer];
    const bool more = layer + 1 < a.layers;
    FlaggedWord* o_words = exchange_words(a.o_partial, a.hkv, a.hidden, layer);
    FlaggedWord* mlp_words = exchange_words(a.mlp_partial, clusters, a.hidden, layer);
    const unsigned o_flag = exchange_flag(launch, layer, kOProjSums);
    const unsigned mlp_flag = exchange_flag(launch, layer, kDownSums);
    const Gains post_gains = load_gains(l.post_norm, a.hidden);
    if (attends) {
      prefetch_keys(b, l);
      queue_qk_gains(l, s);
      // The phase that the other blocks' q/k/v columns complete (their stores may land before this arrival).
      if (threadIdx.x == 0) mbarrier_expect_bytes(&qkv_in, kQkvBytesIn<kGroup>);
      normalise(h, input_gains, l.input_eps, a.hidden, xn, s);
      mbarrier_wait(&x_loaded, x_phase++ & 1u);
      qkv_phase(b, xn, s, &qkv_in, cluster);
      const KeyBatch first_keys = first_key_batch(b, l);  // in flight over the barrier and the q/k norms
      __syncthreads();
      if (threadIdx.x == 0) b.queue_gate_up(layer);
      wait_async_copies();  // the q/k gains, landed long since; the block barrier publishes them to the block
      __syncthreads();
      mbarrier_wait<true>(&qkv_in, qkv_phase_count++ & 1u);
      prepare_heads(b, l, s);
      attend(b, l, s, first_keys);
      cluster.sync();
      merge_blocks(b, s, cluster);
      mbarrier_wait(&y_loaded, y_phase++ & 1u);
      o_proj_phase(b, s, o_words, o_flag);
      __syncthreads();
      if (threadIdx.x == 0) b.queue_down(layer);  // y is read
    }
    // The o_proj sums' columns of h come in as stores on o_sums_in, not behind a cluster barrier. The down sums' keep
    // theirs: a block of a cluster without attention could otherwise store the next layer's columns into a block
    // before its stores of this layer's have landed there.
    if (threadIdx.x == 0) mbarrier_expect_bytes(&o_sums_in, added_bytes_in(a.hidden));
    add_partials(b, o_words, a.hkv, o_flag, h, s, cluster, &o_sums_in);
    mbarrier_wait<true>(&o_sums_in, o_sums_phase++ & 1u);

    normalise(h, post_gains, l.post_eps, a.hidden, xn, s);
    mbarrier_wait(&x_loaded, x_phase++ & 1u);
    swiglu_phase(b, xn, s);
    if (threadIdx.x == 0 && more) attends ? b.queue_qkv(layer + 1) : b.queue_gate_up(layer + 1);
    mbarrier_wait(&y_loaded, y_phase++ & 1u);
    down_phase(b, s, down_partial);
    if (more) input_gains = load_gains(a.layer[layer + 1].input_norm, a.hidden);
    __syncthreads();
    if (threadIdx.x == 0 && more) attends ? b.queue_o_proj(layer + 1) : b.queue_down(layer + 1);
    if (threadIdx.x == 0) mbarrier_expect_bytes(&down_in_bar, down_bytes_in(a.hidden));
    // down_in is free: every block of the cluster summed the layer before's before the cluster barrier below.
    push_down_partial(b, down_partial, down_in, &down_in_bar, cluster);
    mbarrier_wait<true>(&down_in_bar, down_in_phase++ & 1u);
    cluster_down_sum(b, down_partial, down_in, mlp_words, mlp_flag);
    add_partials(b, mlp_words, clusters, mlp_flag, h, s, cluster);
    cluster.sync();
  }
  if (blockIdx.x == 0)
    for (int i = threadIdx.x; i < a.hidden; i += kThreads) a.h[i] = h[i];
  count_launch_exit(a.launches);
}

using ClusterKernel = void (*)(ClusterArgs);

ClusterKernel kernel_for_group(int64_t group) {
  switch (group) {
    case 1: return clustered_layers_kernel<1>;
    case 2: return clustered_layers_kernel<2>;
    case 4: return clustered_layers_kernel<4>;
    default: return nullptr;
  }
}

size_t group_scratch_bytes(int64_t group) {
  switch (group) {
    case 1: return sizeof(GroupScratch<1>);
    case 2: return sizeof(GroupScratch<2>);
    default: return sizeof(GroupScratch<4>);
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct ClusterPlan {
  ClusterKernel kernel = nullptr;
  int blocks = 0;
  uint32_t x_bytes = 0, y_bytes = 0;
  size_t bytes = 0;
};

// The grid: the most clusters of eight, one block an SM, that can all be resident with the shared memory their
// slices need (fewer blocks take wider gate|up and down slices), and at least one cluster a kv head.
std::optional<ClusterPlan> make_plan(int64_t hidden, int64_t hq, int64_t hkv, int64_t intermediate) {
  int device = 0, major = 0, optin = 0, sms = 0;
  VEOMNI_CUDA_CHECK(cudaGetDevice(&device));
  VEOMNI_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  VEOMNI_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  VEOMNI_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (major < 9) return std::nullopt;
  const int64_t group = hq / hkv;
  const ClusterKernel kernel = kernel_for_group(group);
  if (kernel == nullptr) return std::nullopt;
  cudaFuncAttributes attributes{};
  VEOMNI_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  const int64_t bf = sizeof(bf16);
  const int64_t scratch =
      2 * ceil_div(hidden * bf, 16) * 16 + 2 * hidden * 4 + static_cast<int64_t>(group_scratch_bytes(group));
  for (int64_t clusters = sms / kClusterBlocks; clusters >= hkv; --clusters) {
    const int64_t blocks = clusters * kClusterBlocks;
    const int64_t widest = ceil_div(intermediate / kChunk, blocks) * kChunk;
    if (widest > 64) continue;  // GroupScratch::act
    const int64_t qkv_slice = (group + 2) * kHeadDim / kClusterBlocks * hidden * bf;
    const int64_t gate_up_slice = 2 * widest * hidden * bf;
    const int64_t o_slice = hidden / kClusterBlocks * group * kHeadDim * bf;
    const int64_t down_slice = hidden * widest * bf;
    ClusterPlan plan;
    plan.kernel = kernel;
    plan.blocks = static_cast<int>(blocks);
    plan.x_bytes = static_cast<uint32_t>(ceil_div(std::max(qkv_slice, gate_up_slice), 128) * 128);
    plan.y_bytes = static_cast<uint32_t>(ceil_div(std::max(o_slice, down_slice), 128) * 128);
    plan.bytes = static_cast<size_t>(plan.x_bytes + plan.y_bytes + scratch);
    if (plan.bytes + attributes.sharedSizeBytes > static_cast<size_t>(optin)) continue;
    // The most any plan asks for: each launch passes its own size.
    VEOMNI_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           optin - static_cast<int>(attributes.sharedSizeBytes)));
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(static_cast<unsigned>(blocks));
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = plan.bytes;
    cudaLaunchAttribute cluster = {};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = kClusterBlocks;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;
    int resident = 0;
    VEOMNI_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&resident, kernel, &config));
    if (resident >= clusters) return plan;
  }
  return std::nullopt;
}

std::optional<ClusterPlan> plan_for(int64_t hidden, int64_t hq, int64_t hkv, int64_t intermediate) {
  static std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, std::optional<ClusterPlan>> plans;
  const auto key = std::make_tuple(hidden, hq, hkv, intermediate);
  auto found = plans.find(key);
  if (found == plans.end()) found = plans.emplace(key, make_plan(hidden, hq, hkv, intermediate)).first;
  return found->second;
}

// o_proj [hidden, hq * head_dim] as [rows][heads][head_dim]; a box: an eighth of the rows of a group's heads.
CUtensorMap o_proj_map(const Tensor& o_proj, int64_t hidden, int64_t hq, int64_t group) {
  const uint64_t head_bytes = kHeadDim * sizeof(bf16);
  return bf16_tensor_map(o_proj.raw_data(), {kHeadDim, static_cast<uint64_t>(hq), static_cast<uint64_t>(hidden)},
                         {head_bytes, hq * head_bytes},
                         {kHeadDim, static_cast<uint32_t>(group), static_cast<uint32_t>(hidden / kClusterBlocks)});
}

// down [hidden, intermediate] as [hidden / 64][64][intermediate]; a box: `columns` columns of every row.
CUtensorMap down_map(const Tensor& down, int64_t hidden, int64_t intermediate, int columns) {
  constexpr int64_t kRowsPerGroup = 64;  // hidden is a multiple of 64 (dense_decode_layers_clustered_fits)
  const uint64_t row_bytes = intermediate * sizeof(bf16), groups = hidden / kRowsPerGroup;
  return bf16_tensor_map(down.raw_data(), {static_cast<uint64_t>(intermediate), kRowsPerGroup, groups},
                         {row_bytes, kRowsPerGroup * row_bytes},
                         {static_cast<uint32_t>(columns), kRowsPerGroup, static_cast<uint32_t>(groups)});
}

// The kernel's two launch counters (ClusterArgs::launches; decode_layer_run.cuh's zeroed_device_counters).
unsigned* launch_counters() {
  static unsigned* counters = nullptr;
  return zeroed_device_counters(counters, 2);
}

// The flagged words of the partial sums, zero at first and written only by this kernel, so that a word that carries
// a launch's flag was written in that launch: [2, hkv, hidden] of o_proj's sums, then [2, clusters, hidden] of
// down_proj's, for any plan (hkv <= clusters <= the SMs / 8, hidden <= kMaxHidden).
FlaggedWord* exchange_buffer() {
  static unsigned* words = nullptr;
  if (words == nullptr) {
    int device = 0, sms = 0;
    VEOMNI_CUDA_CHECK(cudaGetDevice(&device));
    VEOMNI_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const size_t count = size_t{2} * 2 * (sms / kClusterBlocks) * kMaxHidden;
    zeroed_device_counters(words, count * sizeof(FlaggedWord) / sizeof(unsigned));
  }
  return reinterpret_cast<FlaggedWord*>(words);
}

}  // namespace

bool dense_decode_layers_clustered_enabled() {
  const char* value = std::getenv("VEOMNI_DECODE_LAYER_KERNEL");  // read each time: tests switch it
  return value == nullptr || value[0] == '\0' || std::strcmp(value, "2") == 0;
}

bool dense_decode_layers_clustered_fits(const std::vector<DenseDecodeLayer>& layers,
                                        const std::vector<Tensor>& k_caches, const std::vector<Tensor>& v_caches,
                                        const Tensor& h) {
  if (layers.empty() || h.dim(0) != 1) return false;
  const DenseDecodeLayer& first = layers[0];
  const int64_t hidden = h.dim(1), hq = first.q_heads, hkv = first.kv_heads;
  if (first.head_dim != kHeadDim || hkv < 1 || hq % hkv != 0 || k_caches[0].dim(1) > kMaxCacheLen) return false;
  if (hidden % (kClusterBlocks * kChunk) != 0 || hidden > kMaxHidden || first.gate_up.dim(0) % (2 * kChunk) != 0)
    return false;
  if (!uniform_bf16_layers(layers, k_caches, v_caches, h)) return false;
  if (!plan_for(hidden, hq, hkv, first.gate_up.dim(0) / 2) || !tensor_maps_available()) return false;
  return launch_counters() != nullptr && exchange_buffer() != nullptr;
}

void dense_decode_layers_clustered(const std::vector<DenseDecodeLayer>& layers, const Tensor& cos, const Tensor& sin,
                                   const Tensor& write_rows, const Tensor& cache_rows, std::vector<Tensor>& k_caches,
                                   std::vector<Tensor>& v_caches, Tensor& h) {
  const DenseDecodeLayer& first = layers.front();
  const int64_t hidden = h.dim(1), hq = first.q_heads, hkv = first.kv_heads, inter = first.gate_up.dim(0) / 2;
  const std::optional<ClusterPlan> plan = plan_for(hidden, hq, hkv, inter);
  VEOMNI_CHECK(plan.has_value(), "dense_decode_layers: no clustered-kernel plan for these shapes");
  unsigned* counters = launch_counters();
  VEOMNI_CHECK(counters != nullptr, "dense_decode_layers: the kernel's counters were first needed inside a capture");
  FlaggedWord* words = exchange_buffer();
  VEOMNI_CHECK(words != nullptr, "dense_decode_layers: the kernel's words were first needed inside a capture");

  ClusterArgs args{};
  args.h = data_of<bf16>(h);
  args.o_partial = words;
  args.mlp_partial = words + 2 * hkv * hidden;
  args.launches = counters;
  args.cos = data_of<const float>(cos);
  args.sin = data_of<const float>(sin);
  args.write_rows = data_of<const int32_t>(write_rows);
  args.cache_rows = data_of<const int32_t>(cache_rows);
  args.hidden = static_cast<int>(hidden);
  args.hq = static_cast<int>(hq);
  args.hkv = static_cast<int>(hkv);
  args.intermediate = static_cast<int>(inter);
  args.batch = static_cast<int>(k_caches.front().dim(0));
  args.cache_len = static_cast<int>(k_caches.front().dim(1));
  args.x_bytes = plan->x_bytes;
  args.y_bytes = plan->y_bytes;
  const int64_t chunks = inter / kChunk;
  args.narrow_columns = static_cast<int>(chunks / plan->blocks * kChunk);
  const bool uneven = chunks % plan->blocks != 0;

  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(plan->blocks));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = plan->bytes;
  config.stream = cuda_rt::stream();
  cudaLaunchAttribute attrs[2] = {};
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = kClusterBlocks;
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attrs;
  config.numAttrs = OverlappedLaunches::active() ? 2 : 1;
  for (size_t begin = 0; begin < layers.size(); begin += kMaxLayersPerLaunch) {
    const size_t end = std::min(layers.size(), begin + kMaxLayersPerLaunch);
    args.layers = static_cast<int>(end - begin);
    for (size_t i = begin; i < end; ++i) {
      const size_t j = i - begin;
      args.layer[j] = decode_layer_pointers(layers[i], k_caches[i], v_caches[i]);
      args.o_map[j] = o_proj_map(layers[i].o_proj, hidden, hq, hq / hkv);
      if (args.narrow_columns > 0) args.down_map[j][0] = down_map(layers[i].down, hidden, inter, args.narrow_columns);
      if (uneven) args.down_map[j][1] = down_map(layers[i].down, hidden, inter, args.narrow_columns + kChunk);
    }
    VEOMNI_CUDA_CHECK(cudaLaunchKernelEx(&config, plan->kernel, args));
  }
}

}  // namespace veomni::ops::cuda
