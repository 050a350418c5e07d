// CUDA packed variable-length attention (flash-attention-2 style), forward and backward: fp32 FMA kernels for f32
// tensors, bf16 tensor-core kernels (mma.sync m16n8k16, fp32 accumulation) for bf16 tensors.
//
// Work is cut into tiles of rows of one sequence; a CTA takes one tile of one head, so no S x S matrix ever exists.
// Forward: a CTA owns a block of queries and runs an online softmax over the key blocks of its sequence (only up to
// the diagonal when causal), then writes out and lse. Backward: D = rowsum(dO * O) first; then a CTA owns a block of
// keys of one kv head, visits every query block of every query head of its GQA group that sees those keys,
// recomputes P = exp(S * scale - lse), keeps dK and dV in registers, and adds its share of dQ into an fp32 buffer
// with atomics (bf16 dq is cast from that buffer at the end).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {
namespace {

using bf16_t = __nv_bfloat16;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr int kMaxHeadDim = 256;

// Tile shapes. fp32 kernels: 256 threads. Tensor-core kernels: warps own 16-row m-tiles of the CTA's block.
constexpr int kSimtThreads = 256;
constexpr int kSimtForwardRows = 64, kSimtForwardKeys = 32;
constexpr int kSimtBackwardKeys = 32, kSimtBackwardRows = 32;
constexpr int kMmaPad = 8;  // bf16 elements of padding per shared row: conflict-free ldmatrix
constexpr int kMmaForwardWarps = 4;
constexpr int kMmaBackwardRows = 64;   // queries per backward step
constexpr int kMmaSplitColumns = 128;  // backward: dK/dV columns a CTA owns (head_dim 256 is split in two)

// Forward: each warp owns MT m-tiles, so every K/V fragment it loads serves MT x 16 queries; BN keys per step.
// head_dim 256 keeps one m-tile and fewer keys to stay within the register file.
__host__ __device__ constexpr int mma_forward_mtiles(int dp) { return dp > 128 ? 1 : 2; }
__host__ __device__ constexpr int mma_forward_rows(int dp) { return kMmaForwardWarps * 16 * mma_forward_mtiles(dp); }
__host__ __device__ constexpr int mma_forward_keys(int dp) { return dp > 128 ? 32 : 64; }
// Backward: each warp owns 16 keys; more key warps per CTA halve the dQ atomics and the Q/dO reloads per key.
__host__ __device__ constexpr int mma_backward_warps(int dp) { return dp > 128 ? 4 : 8; }

// One block of rows [row0, row0 + block) of the sequence [start, start + len): with a head, the work of one CTA.
struct Tile {
  int32_t start, len, row0;
};
static_assert(sizeof(Tile) == 12);

template <typename T>
struct ForwardArgs {
  const T* q;
  const T* k;
  const T* v;
  T* out;
  float* lse;
  const Tile* tiles;
  int64_t total;  // S
  int q_heads, kv_heads, group, dim;
  float scale, scale_log2;
  bool causal;
  bool vector_loads;  // 16-byte rows: dim % 8 == 0 and aligned pointers (tensor-core kernels)
};

template <typename T>
struct BackwardArgs {
  const T* q;
  const T* k;
  const T* v;
  const T* dout;
  const float* lse;    // [Hq, S]
  const float* delta;  // [Hq, S]: rowsum(dO * O)
  float* dq_accum;     // [S, Hq, D] f32, zeroed, accumulated with atomics
  T* dk;
  T* dv;
  const Tile* tiles;
  int64_t total;
  int q_heads, kv_heads, group, dim;
  float scale, scale_log2;
  bool causal;
  bool vector_loads;
};

// ---------------------------------------------------------------- device helpers

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(bf16_t x) { return __bfloat162float(x); }

// row[col] = x0 and row[col + 1] = x1, each only inside [0, dim); col is even.
__device__ __forceinline__ void store_pair(bf16_t* row, int col, int dim, float x0, float x1) {
  if ((dim & 1) == 0 && col + 1 < dim) {
    *reinterpret_cast<__nv_bfloat162*>(row + col) = __floats2bfloat162_rn(x0, x1);
    return;
  }
  if (col < dim) row[col] = __float2bfloat16_rn(x0);
  if (col + 1 < dim) row[col + 1] = __float2bfloat16_rn(x1);
}

// Adds (x0, x1) into row[col], row[col + 1] (inside [0, dim)); one 8-byte atomic when aligned.
__device__ __forceinline__ void atomic_add_pair(float* row, int col, int dim, float x0, float x1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if ((dim & 1) == 0 && col + 1 < dim) {
    atomicAdd(reinterpret_cast<float2*>(row + col), make_float2(x0, x1));
    return;
  }
#endif
  if (col < dim) atomicAdd(row + col, x0);
  if (col + 1 < dim) atomicAdd(row + col + 1, x1);
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared without staging in registers; zero-fills when !valid (src is then not read).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void cp_async_4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 4 : 0));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// Four 8x8 b16 matrices from shared memory; lane l supplies the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}

// The same, each matrix transposed on the way into registers.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}

// c[16x8] += a[16x16] * b[16x8], bf16 inputs, fp32 accumulators. Fragments (g = lane / 4, t = lane % 4):
// a: {(g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..)}; b: {(k 2t..2t+1, n g), (k 2t+8.., n g)};
// c: {(g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)}.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The A fragment of a 16x16 block of a product whose left factor is held as accumulators: columns [16kk, 16kk+16)
// of a 16 x N accumulator tile c[N/8][4] (flash-attention-2's register reuse of P and dS).
template <int N>
__device__ __forceinline__ void accumulators_as_a(uint32_t (&a)[4], const float (&c)[N][4], int kk) {
  a[0] = pack_bf16(c[2 * kk][0], c[2 * kk][1]);
  a[1] = pack_bf16(c[2 * kk][2], c[2 * kk][3]);
  a[2] = pack_bf16(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = pack_bf16(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

// acc[mt][16 x 8N] += A_mt[16 x DP] * B^T for MT m-tiles of A (m-tile mt starts at row 16 mt of a_rows) and
// B [8N rows][DP] at b_rows, both row-major in shared memory with row stride `stride`; every B fragment serves all
// MT m-tiles. k-steps past `dim` are zero padding and skipped.
template <int MT, int N, int DP>
__device__ __forceinline__ void mma_a_bt(float (&acc)[MT][N][4], const bf16_t* a_rows, const bf16_t* b_rows, int stride,
                                         int dim, int lane) {
#pragma unroll
  for (int kk = 0; kk < DP / 16; ++kk) {
    if (kk * 16 >= dim) break;
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      ldmatrix_x4(a[mt], a_rows + (mt * 16 + (lane & 15)) * stride + kk * 16 + (lane >> 4) * 8);
#pragma unroll
    for (int n2 = 0; n2 < N / 2; ++n2) {
      uint32_t b[4];
      ldmatrix_x4(b, b_rows + (n2 * 16 + (lane & 7) + ((lane >> 4) << 3)) * stride + kk * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_bf16(acc[mt][2 * n2], a[mt], b[0], b[1]);
        mma_bf16(acc[mt][2 * n2 + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// acc[mt][16 x 8N] += P_mt[16 x 16K] * B where P is held as accumulators p[mt][2K][4] and B [16K rows][8N columns
// starting at b_cols] is row-major in shared memory; column pairs of 16 at or past `dim` (counting from col0) are
// skipped.
template <int MT, int K, int N, int PN>
__device__ __forceinline__ void mma_acc_b(float (&acc)[MT][N][4], const float (&p)[MT][PN][4], const bf16_t* b_cols,
                                          int stride, int col0, int dim, int lane) {
#pragma unroll
  for (int kk = 0; kk < K; ++kk) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) accumulators_as_a(a[mt], p[mt], kk);
#pragma unroll
    for (int n2 = 0; n2 < N / 2; ++n2) {
      if (col0 + n2 * 16 >= dim) break;
      uint32_t b[4];
      ldmatrix_x4_trans(b, b_cols + (kk * 16 + (lane & 15)) * stride + n2 * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_bf16(acc[mt][2 * n2], a[mt], b[0], b[1]);
        mma_bf16(acc[mt][2 * n2 + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// Rows [0, ROWS) of a shared tile (row stride `stride`) from rows token0.. of one head of x [S, heads, dim]: rows at
// or past valid_rows and columns at or past dim are zero (the padding must read as zero in the products).
template <int ROWS, int DP, int THREADS>
__device__ __forceinline__ void load_tile(bf16_t* tile, int stride, const bf16_t* x, int64_t token0, int valid_rows,
                                          int heads, int head, int dim, bool vector_loads) {
  if (vector_loads) {
    constexpr int kChunks = DP / 8;
    for (int i = threadIdx.x; i < ROWS * kChunks; i += THREADS) {
      const int r = i / kChunks, c = (i % kChunks) * 8;
      const bool valid = r < valid_rows && c < dim;
      const bf16_t* src = valid ? x + ((token0 + r) * heads + head) * dim + c : x;
      cp_async_16(tile + r * stride + c, src, valid);
    }
  } else {
    for (int i = threadIdx.x; i < ROWS * DP; i += THREADS) {
      const int r = i / DP, c = i % DP;
      tile[r * stride + c] =
          r < valid_rows && c < dim ? x[((token0 + r) * heads + head) * dim + c] : __float2bfloat16_rn(0.0f);
    }
  }
}

template <int ROWS, int DP, int THREADS>
__device__ __forceinline__ void load_tile(float* tile, int stride, const float* x, int64_t token0, int valid_rows,
                                          int heads, int head, int dim) {
  for (int i = threadIdx.x; i < ROWS * DP; i += THREADS) {
    const int r = i / DP, c = i % DP;
    tile[r * stride + c] = r < valid_rows && c < dim ? x[((token0 + r) * heads + head) * dim + c] : 0.0f;
  }
}

// Whether key `key` is hidden from query `query` (positions inside the sequence).
__device__ __forceinline__ bool masked(int query, int key, int len, bool causal) {
  return key >= len || query >= len || (causal && key > query);
}

// ---------------------------------------------------------------- fp32 kernels

// Forward, fp32. Thread (r = tid / 4, cg = tid % 4) owns query row r of the block: scores of keys cg + 4i of each
// key block and output columns cg + 4i.
template <int DP>
__global__ void __launch_bounds__(kSimtThreads) attention_forward_simt(ForwardArgs<float> a) {
  constexpr int BM = kSimtForwardRows, BN = kSimtForwardKeys, kStride = DP + 1, kPStride = BN + 1;
  extern __shared__ float smem_f32[];
  float* qs = smem_f32;
  float* ks = qs + BM * kStride;
  float* vs = ks + BN * kStride;
  float* ps = vs + BN * kStride;

  const Tile tile = a.tiles[blockIdx.x / a.q_heads];
  const int head = blockIdx.x % a.q_heads, kv_head = head / a.group;
  const int r = threadIdx.x / 4, cg = threadIdx.x % 4;
  const int q_rows = min(BM, tile.len - tile.row0);
  const int row = tile.row0 + r;
  const int kv_end = a.causal ? tile.row0 + q_rows : tile.len;
  load_tile<BM, DP, kSimtThreads>(qs, kStride, a.q, int64_t{tile.start} + tile.row0, q_rows, a.q_heads, head, a.dim);

  float o[DP / 4] = {};
  float m = -INFINITY, l = 0.0f;
  for (int j0 = 0; j0 < kv_end; j0 += BN) {
    __syncthreads();  // the previous block's products are done with ks / vs
    const int64_t key0 = int64_t{tile.start} + j0;
    load_tile<BN, DP, kSimtThreads>(ks, kStride, a.k, key0, tile.len - j0, a.kv_heads, kv_head, a.dim);
    load_tile<BN, DP, kSimtThreads>(vs, kStride, a.v, key0, tile.len - j0, a.kv_heads, kv_head, a.dim);
    __syncthreads();

    float s[BN / 4] = {};
    for (int kk = 0; kk < DP; ++kk) {
      const float qv = qs[r * kStride + kk];
#pragma unroll
      for (int i = 0; i < BN / 4; ++i) s[i] = fmaf(qv, ks[(cg + 4 * i) * kStride + kk], s[i]);
    }
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < BN / 4; ++i) {
      s[i] = masked(row, j0 + cg + 4 * i, tile.len, a.causal) ? -INFINITY : s[i] * a.scale_log2;
      mx = fmaxf(mx, s[i]);
    }
    const float m_new = fmaxf(m, quad_max(mx));
    const float base = m_new == -INFINITY ? 0.0f : m_new;  // a row that has seen no key yet
    const float correction = exp2f(m - base);
    m = m_new;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < BN / 4; ++i) {
      const float p = exp2f(s[i] - base);
      sum += p;
      ps[r * kPStride + cg + 4 * i] = p;
    }
    l = l * correction + sum;
#pragma unroll
    for (int i = 0; i < DP / 4; ++i) o[i] *= correction;
    __syncwarp();  // a row's probabilities are written and read by the same quad
    for (int c = 0; c < BN; ++c) {
      const float p = ps[r * kPStride + c];
#pragma unroll
      for (int i = 0; i < DP / 4; ++i) o[i] = fmaf(p, vs[c * kStride + cg + 4 * i], o[i]);
    }
  }

  const float l_total = quad_sum(l);
  if (r >= q_rows) return;
  const int64_t token = int64_t{tile.start} + row;
  float* out_row = a.out + (token * a.q_heads + head) * a.dim;
  const float inv = 1.0f / l_total;
#pragma unroll
  for (int i = 0; i < DP / 4; ++i)
    if (cg + 4 * i < a.dim) out_row[cg + 4 * i] = o[i] * inv;
  if (cg == 0) a.lse[head * a.total + token] = (m + log2f(l_total)) * kLn2;
}

// Backward, fp32, one CTA per key block of one kv head. Score tiles [key c = tid / 8][query rg + 8i]; dK/dV rows
// c = tid / 8, columns tid % 8 + 8j; dQ rows tid / 8, columns tid % 8 + 8j, added with atomics.
template <int DP>
__global__ void __launch_bounds__(kSimtThreads) attention_backward_simt(BackwardArgs<float> a) {
  constexpr int BN = kSimtBackwardKeys, BM = kSimtBackwardRows, kStride = DP + 1, kSStride = BM + 1;
  extern __shared__ float smem_f32[];
  float* ks = smem_f32;
  float* vs = ks + BN * kStride;
  float* qs = vs + BN * kStride;
  float* dos = qs + BM * kStride;
  float* ps = dos + BM * kStride;
  float* dss = ps + BN * kSStride;
  float* lse_s = dss + BN * kSStride;
  float* delta_s = lse_s + BM;

  const Tile tile = a.tiles[blockIdx.x / a.kv_heads];
  const int kv_head = blockIdx.x % a.kv_heads;
  const int c = threadIdx.x / 8, sub = threadIdx.x % 8;
  const int key = tile.row0 + c;
  const int kv_rows = min(BN, tile.len - tile.row0);
  const int64_t key0 = int64_t{tile.start} + tile.row0;
  load_tile<BN, DP, kSimtThreads>(ks, kStride, a.k, key0, kv_rows, a.kv_heads, kv_head, a.dim);
  load_tile<BN, DP, kSimtThreads>(vs, kStride, a.v, key0, kv_rows, a.kv_heads, kv_head, a.dim);

  float dk[DP / 8] = {}, dv[DP / 8] = {};
  const int first_query = a.causal ? tile.row0 : 0;  // earlier queries see none of these keys
  for (int h = kv_head * a.group; h < (kv_head + 1) * a.group; ++h) {
    for (int q0 = first_query; q0 < tile.len; q0 += BM) {
      const int q_rows = min(BM, tile.len - q0);
      const int64_t token0 = int64_t{tile.start} + q0;
      __syncthreads();  // the previous block is done with qs / dos / ps / dss
      load_tile<BM, DP, kSimtThreads>(qs, kStride, a.q, token0, q_rows, a.q_heads, h, a.dim);
      load_tile<BM, DP, kSimtThreads>(dos, kStride, a.dout, token0, q_rows, a.q_heads, h, a.dim);
      if (threadIdx.x < BM) {
        const bool valid = static_cast<int>(threadIdx.x) < q_rows;
        lse_s[threadIdx.x] = valid ? a.lse[h * a.total + token0 + threadIdx.x] * kLog2e : 0.0f;
        delta_s[threadIdx.x] = valid ? a.delta[h * a.total + token0 + threadIdx.x] : 0.0f;
      }
      __syncthreads();

      float st[BM / 8] = {}, dpt[BM / 8] = {};
      for (int kk = 0; kk < DP; ++kk) {
        const float kv = ks[c * kStride + kk], vv = vs[c * kStride + kk];
#pragma unroll
        for (int i = 0; i < BM / 8; ++i) {
          st[i] = fmaf(kv, qs[(sub + 8 * i) * kStride + kk], st[i]);
          dpt[i] = fmaf(vv, dos[(sub + 8 * i) * kStride + kk], dpt[i]);
        }
      }
#pragma unroll
      for (int i = 0; i < BM / 8; ++i) {
        const int qr = sub + 8 * i;
        const float p = masked(q0 + qr, key, tile.len, a.causal) ? 0.0f : exp2f(fmaf(st[i], a.scale_log2, -lse_s[qr]));
        ps[c * kSStride + qr] = p;
        dss[c * kSStride + qr] = p * (dpt[i] - delta_s[qr]) * a.scale;
      }
      __syncthreads();

      for (int qr = 0; qr < BM; ++qr) {
        const float p = ps[c * kSStride + qr], ds = dss[c * kSStride + qr];
#pragma unroll
        for (int j = 0; j < DP / 8; ++j) {
          dv[j] = fmaf(p, dos[qr * kStride + sub + 8 * j], dv[j]);
          dk[j] = fmaf(ds, qs[qr * kStride + sub + 8 * j], dk[j]);
        }
      }
      const int qr = c;  // dQ: this thread's query row
      if (qr < q_rows) {
        float* dq_row = a.dq_accum + ((token0 + qr) * a.q_heads + h) * a.dim;
#pragma unroll
        for (int j = 0; j < DP / 8; ++j) {
          const int col = sub + 8 * j;
          if (col >= a.dim) break;
          float acc = 0.0f;
          for (int kc = 0; kc < BN; ++kc) acc = fmaf(dss[kc * kSStride + qr], ks[kc * kStride + col], acc);
          atomicAdd(dq_row + col, acc);
        }
      }
    }
  }

  if (c >= kv_rows) return;
  const int64_t offset = ((key0 + c) * a.kv_heads + kv_head) * a.dim;
#pragma unroll
  for (int j = 0; j < DP / 8; ++j) {
    const int col = sub + 8 * j;
    if (col >= a.dim) break;
    a.dk[offset + col] = dk[j];
    a.dv[offset + col] = dv[j];
  }
}

// ---------------------------------------------------------------- bf16 tensor-core kernels

template <int DP>
constexpr size_t mma_forward_smem() {
  return sizeof(bf16_t) * (mma_forward_rows(DP) + 2 * mma_forward_keys(DP)) * (DP + kMmaPad);
}

// Forward, bf16. Warp w owns query rows [16 MT w, 16 MT (w + 1)) of the block; K and V blocks are issued with
// cp.async so that V's load overlaps QK^T and the softmax, and the next K's load overlaps PV.
template <int DP>
__global__ void __launch_bounds__(kMmaForwardWarps * 32) attention_forward_mma(ForwardArgs<bf16_t> a) {
  constexpr int kThreads = kMmaForwardWarps * 32, MT = mma_forward_mtiles(DP), BM = mma_forward_rows(DP);
  constexpr int BN = mma_forward_keys(DP), kStride = DP + kMmaPad;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16_t* qs = reinterpret_cast<bf16_t*>(smem_raw);
  bf16_t* ks = qs + BM * kStride;
  bf16_t* vs = ks + BN * kStride;

  const Tile tile = a.tiles[blockIdx.x / a.q_heads];
  const int head = blockIdx.x % a.q_heads, kv_head = head / a.group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int q_rows = min(BM, tile.len - tile.row0);
  const int kv_end = a.causal ? tile.row0 + q_rows : tile.len;
  const int64_t start = tile.start;
  load_tile<BM, DP, kThreads>(qs, kStride, a.q, start + tile.row0, q_rows, a.q_heads, head, a.dim, a.vector_loads);
  load_tile<BN, DP, kThreads>(ks, kStride, a.k, start, tile.len, a.kv_heads, kv_head, a.dim, a.vector_loads);
  cp_async_commit();

  float o[MT][DP / 8][4] = {};
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      m[mt][i] = -INFINITY;
      l[mt][i] = 0.0f;
    }
  const int warp_row0 = warp * 16 * MT;
  for (int j0 = 0; j0 < kv_end; j0 += BN) {
    cp_async_wait_all();
    __syncthreads();  // K block visible; every warp is past the previous PV, so vs may be refilled
    load_tile<BN, DP, kThreads>(vs, kStride, a.v, start + j0, tile.len - j0, a.kv_heads, kv_head, a.dim,
                                a.vector_loads);
    cp_async_commit();

    float s[MT][BN / 8][4] = {};
    mma_a_bt<MT, BN / 8, DP>(s, qs + warp_row0 * kStride, ks, kStride, a.dim, lane);

    const bool need_mask = j0 + BN > tile.len || (a.causal && j0 + BN - 1 > tile.row0);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 2; ++i) {  // rows g and g + 8 of the m-tile
        const int row = tile.row0 + warp_row0 + mt * 16 + g + 8 * i;
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = s[mt][nt][2 * i + e];
            x = need_mask && masked(row, j0 + nt * 8 + 2 * t + e, tile.len, a.causal) ? -INFINITY : x * a.scale_log2;
            mx = fmaxf(mx, x);
          }
        const float m_new = fmaxf(m[mt][i], quad_max(mx));
        const float base = m_new == -INFINITY ? 0.0f : m_new;  // a row that has seen no key yet
        const float correction = exp2f(m[mt][i] - base);
        m[mt][i] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = s[mt][nt][2 * i + e];
            x = exp2f(x - base);
            sum += x;
          }
        l[mt][i] = l[mt][i] * correction + sum;
#pragma unroll
        for (int dn = 0; dn < DP / 8; ++dn) {
          o[mt][dn][2 * i] *= correction;
          o[mt][dn][2 * i + 1] *= correction;
        }
      }

    cp_async_wait_all();
    __syncthreads();  // V block visible; every warp is past QK^T, so ks may be refilled
    if (j0 + BN < kv_end) {
      load_tile<BN, DP, kThreads>(ks, kStride, a.k, start + j0 + BN, tile.len - j0 - BN, a.kv_heads, kv_head, a.dim,
                                  a.vector_loads);
      cp_async_commit();
    }
    mma_acc_b<MT, BN / 16, DP / 8>(o, s, vs, kStride, 0, a.dim, lane);
  }

#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float l_total = quad_sum(l[mt][i]);
      const int r = warp_row0 + mt * 16 + g + 8 * i;
      if (r >= q_rows) continue;
      const int64_t token = start + tile.row0 + r;
      bf16_t* out_row = a.out + (token * a.q_heads + head) * a.dim;
      const float inv = 1.0f / l_total;
#pragma unroll
      for (int dn = 0; dn < DP / 8; ++dn)
        store_pair(out_row, dn * 8 + 2 * t, a.dim, o[mt][dn][2 * i] * inv, o[mt][dn][2 * i + 1] * inv);
      if (t == 0) a.lse[head * a.total + token] = (m[mt][i] + log2f(l_total)) * kLn2;
    }
}

template <int DP, int STAGES, int WARPS>
constexpr size_t mma_backward_smem() {
  constexpr int BN = 16 * WARPS, BM = kMmaBackwardRows;
  return sizeof(bf16_t) * ((2 * BN + 2 * STAGES * BM) * (DP + kMmaPad) + BN * (BM + kMmaPad)) +
         sizeof(float) * 2 * STAGES * BM;
}

// Backward, bf16: one CTA per block of 16 WARPS keys of one kv head and one range of DC output columns (the
// products over the head dimension always use all of it). Warp w owns keys [16w, 16w + 16): it computes
// S^T = K Q^T and dP^T = V dO^T for them, so P^T and dS^T sit in its accumulators and feed dV += P^T dO and
// dK += dS^T Q straight from registers. dS^T goes through shared memory for dQ = dS K, which the warps share out
// by 16 query rows and DC / (WARPS / 4) columns. With STAGES = 2 the next query block's Q, dO, lse and D load
// while the current one is processed.
template <int DP, int DC, int STAGES, int WARPS>
__global__ void __launch_bounds__(WARPS * 32) attention_backward_mma(BackwardArgs<bf16_t> a) {
  constexpr int kThreads = WARPS * 32, BN = 16 * WARPS, BM = kMmaBackwardRows;
  constexpr int kStride = DP + kMmaPad, kSStride = BM + kMmaPad;
  constexpr int kDqColumns = DC / (WARPS / (BM / 16));  // per warp
  constexpr int kDqChunk = kDqColumns < 64 ? kDqColumns : 64;
  static_assert(WARPS % (BM / 16) == 0 && kDqColumns % 16 == 0);
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16_t* ks = reinterpret_cast<bf16_t*>(smem_raw);
  bf16_t* vs = ks + BN * kStride;
  bf16_t* qs = vs + BN * kStride;                                // [STAGES][BM][kStride]
  bf16_t* dos = qs + STAGES * BM * kStride;                      // [STAGES][BM][kStride]
  bf16_t* dst = dos + STAGES * BM * kStride;                     // dS^T [BN][kSStride]
  float* lse_s = reinterpret_cast<float*>(dst + BN * kSStride);  // [STAGES][BM]
  float* delta_s = lse_s + STAGES * BM;

  const Tile tile = a.tiles[blockIdx.x / a.kv_heads];
  const int kv_head = blockIdx.x % a.kv_heads;
  const int col0 = blockIdx.y * DC;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int64_t start = tile.start;
  const int kv_rows = min(BN, tile.len - tile.row0);
  const int first_block = a.causal ? tile.row0 / BM : 0;  // earlier queries see none of these keys
  const int blocks_per_head = (tile.len + BM - 1) / BM - first_block;
  const int iterations = a.group * blocks_per_head;

  load_tile<BN, DP, kThreads>(ks, kStride, a.k, start + tile.row0, kv_rows, a.kv_heads, kv_head, a.dim, a.vector_loads);
  load_tile<BN, DP, kThreads>(vs, kStride, a.v, start + tile.row0, kv_rows, a.kv_heads, kv_head, a.dim, a.vector_loads);
  auto load_queries = [&](int it, int stage) {
    const int h = kv_head * a.group + it / blocks_per_head;
    const int q0 = (first_block + it % blocks_per_head) * BM;
    const int q_rows = min(BM, tile.len - q0);
    const int64_t token0 = start + q0;
    load_tile<BM, DP, kThreads>(qs + stage * BM * kStride, kStride, a.q, token0, q_rows, a.q_heads, h, a.dim,
                                a.vector_loads);
    load_tile<BM, DP, kThreads>(dos + stage * BM * kStride, kStride, a.dout, token0, q_rows, a.q_heads, h, a.dim,
                                a.vector_loads);
    if (threadIdx.x < BM) {
      const bool valid = static_cast<int>(threadIdx.x) < q_rows;
      const int64_t at = valid ? h * a.total + token0 + threadIdx.x : 0;
      cp_async_4(lse_s + stage * BM + threadIdx.x, a.lse + at, valid);
      cp_async_4(delta_s + stage * BM + threadIdx.x, a.delta + at, valid);
    }
    cp_async_commit();
  };
  load_queries(0, 0);

  float dk[1][DC / 8][4] = {}, dv[1][DC / 8][4] = {};
  const int key_local0 = warp * 16 + g;  // this thread's keys: key_local0 and key_local0 + 8
  const int dq_row0 = (warp % (BM / 16)) * 16;
  const int dq_col0 = col0 + (warp / (BM / 16)) * kDqColumns;
  for (int it = 0; it < iterations; ++it) {
    const int stage = STAGES == 2 ? it & 1 : 0;
    cp_async_wait_all();
    __syncthreads();
    if constexpr (STAGES == 2)
      if (it + 1 < iterations) load_queries(it + 1, stage ^ 1);

    const int h = kv_head * a.group + it / blocks_per_head;
    const int q0 = (first_block + it % blocks_per_head) * BM;
    const int q_rows = min(BM, tile.len - q0);
    const bf16_t* qst = qs + stage * BM * kStride;
    const bf16_t* dost = dos + stage * BM * kStride;
    const float* lse_st = lse_s + stage * BM;
    const float* delta_st = delta_s + stage * BM;

    float st[1][BM / 8][4] = {}, dpt[1][BM / 8][4] = {};
    mma_a_bt<1, BM / 8, DP>(st, ks + warp * 16 * kStride, qst, kStride, a.dim, lane);
    mma_a_bt<1, BM / 8, DP>(dpt, vs + warp * 16 * kStride, dost, kStride, a.dim, lane);

    // P^T into st, dS^T (with the softmax scale) into dpt.
    const bool need_mask = q0 + BM > tile.len || tile.row0 + BN > tile.len || (a.causal && tile.row0 + BN - 1 > q0);
#pragma unroll
    for (int nt = 0; nt < BM / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ql = nt * 8 + 2 * t + (e & 1);
        const int key = tile.row0 + key_local0 + 8 * (e >> 1);
        const float p = need_mask && masked(q0 + ql, key, tile.len, a.causal)
                            ? 0.0f
                            : exp2f(fmaf(st[0][nt][e], a.scale_log2, -lse_st[ql] * kLog2e));
        st[0][nt][e] = p;
        dpt[0][nt][e] = p * (dpt[0][nt][e] - delta_st[ql]) * a.scale;
      }

    mma_acc_b<1, BM / 16, DC / 8>(dv, st, dost + col0, kStride, col0, a.dim, lane);
    mma_acc_b<1, BM / 16, DC / 8>(dk, dpt, qst + col0, kStride, col0, a.dim, lane);

#pragma unroll
    for (int nt = 0; nt < BM / 8; ++nt)
#pragma unroll
      for (int i = 0; i < 2; ++i)
        *reinterpret_cast<uint32_t*>(dst + (key_local0 + 8 * i) * kSStride + nt * 8 + 2 * t) =
            pack_bf16(dpt[0][nt][2 * i], dpt[0][nt][2 * i + 1]);
    __syncthreads();

    // dQ rows [dq_row0, dq_row0 + 16), columns [dq_col0, dq_col0 + kDqColumns) of the block: dS [queries x keys]
    // read transposed out of dS^T.
#pragma unroll
    for (int chunk = 0; chunk < kDqColumns; chunk += kDqChunk) {
      if (dq_col0 + chunk >= a.dim) break;
      float acc[kDqChunk / 8][4] = {};
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        uint32_t ds[4];
        ldmatrix_x4_trans(
            ds, dst + (kk * 16 + (lane & 7) + ((lane >> 4) << 3)) * kSStride + dq_row0 + ((lane >> 3) & 1) * 8);
#pragma unroll
        for (int n2 = 0; n2 < kDqChunk / 16; ++n2) {
          const int col = dq_col0 + chunk + n2 * 16;
          if (col >= a.dim) break;
          uint32_t b[4];
          ldmatrix_x4_trans(b, ks + (kk * 16 + (lane & 15)) * kStride + col + (lane >> 4) * 8);
          mma_bf16(acc[2 * n2], ds, b[0], b[1]);
          mma_bf16(acc[2 * n2 + 1], ds, b[2], b[3]);
        }
      }
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int qr = dq_row0 + g + 8 * i;
        if (qr >= q_rows) continue;
        float* dq_row = a.dq_accum + ((start + q0 + qr) * a.q_heads + h) * a.dim;
#pragma unroll
        for (int nt = 0; nt < kDqChunk / 8; ++nt)
          atomic_add_pair(dq_row, dq_col0 + chunk + nt * 8 + 2 * t, a.dim, acc[nt][2 * i], acc[nt][2 * i + 1]);
      }
    }
    __syncthreads();  // dst and (single stage) the query buffers are free again
    if constexpr (STAGES == 1)
      if (it + 1 < iterations) load_queries(it + 1, 0);
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int c = key_local0 + 8 * i;
    if (c >= kv_rows) continue;
    const int64_t offset = ((start + tile.row0 + c) * a.kv_heads + kv_head) * a.dim;
#pragma unroll
    for (int nt = 0; nt < DC / 8; ++nt) {
      const int col = col0 + nt * 8 + 2 * t;
      store_pair(a.dk + offset, col, a.dim, dk[0][nt][2 * i], dk[0][nt][2 * i + 1]);
      store_pair(a.dv + offset, col, a.dim, dv[0][nt][2 * i], dv[0][nt][2 * i + 1]);
    }
  }
}

// ---------------------------------------------------------------- small kernels of the backward

// delta[h, s] = sum_d dout[s, h, d] * out[s, h, d]: one warp per (token, head) row.
template <typename T>
__global__ void attention_delta(const T* dout, const T* out, float* delta, int64_t total, int heads, int dim) {
  const int64_t row = int64_t{blockIdx.x} * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= total * heads) return;
  const int lane = threadIdx.x % 32;
  float acc = 0.0f;
  for (int c = lane; c < dim; c += 32) acc = fmaf(to_float(dout[row * dim + c]), to_float(out[row * dim + c]), acc);
  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
  if (lane == 0) delta[(row % heads) * total + row / heads] = acc;
}

__global__ void cast_to_bf16(const float* src, bf16_t* dst, int64_t n) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = __float2bfloat16_rn(src[i]);
}

// ---------------------------------------------------------------- host side

// Row blocks of every sequence, the most expensive first so that the long CTAs of causal attention start early.
// queries: the blocks are query blocks (cost: keys up to the block's end); else key blocks (cost: queries after).
std::vector<Tile> make_tiles(const std::vector<int32_t>& cu, int block, bool causal, bool queries) {
  std::vector<Tile> tiles;
  for (size_t b = 0; b + 1 < cu.size(); ++b)
    for (int32_t row0 = 0; row0 < cu[b + 1] - cu[b]; row0 += block) tiles.push_back({cu[b], cu[b + 1] - cu[b], row0});
  auto cost = [&](const Tile& t) -> int64_t {
    if (!causal) return t.len;
    return queries ? std::min(t.len, t.row0 + block) : t.len - t.row0;
  };
  std::stable_sort(tiles.begin(), tiles.end(), [&](const Tile& x, const Tile& y) { return cost(x) > cost(y); });
  return tiles;
}

Tensor upload_tiles(const std::vector<Tile>& tiles, Device device) {
  Tensor t = Tensor::empty({static_cast<int64_t>(tiles.size()) * 3}, DType::I32, device);
  cuda_rt::upload_from_host(t.raw_data(), tiles.data(), tiles.size() * sizeof(Tile));
  return t;
}

// Head dims are padded up to the kernels' instantiations; the padding columns are zero-filled in shared memory.
int padded_dim(int64_t dim, std::initializer_list<int> sizes) {
  for (int p : sizes)
    if (dim <= p) return p;
  throw Error(fmt::format("CUDA attention supports head_dim up to {}, got {}", kMaxHeadDim, dim));
}

void require_dtype(const char* op, DType dtype, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    VEOMNI_CHECK(t->dtype() == dtype, "{}: every activation must share one dtype, got {} and {}", op, dtype_name(dtype),
                 t->describe());
  VEOMNI_CHECK(dtype == DType::F32 || dtype == DType::BF16, "{}: CUDA attention takes f32 or bf16, got {}", op,
               dtype_name(dtype));
}

bool aligned16(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    if (reinterpret_cast<uintptr_t>(t->raw_data()) % 16 != 0) return false;
  return true;
}

template <typename Args>
void launch(void (*kernel)(Args), int64_t ctas, int splits, int threads, size_t smem, const Args& args) {
  VEOMNI_CHECK(ctas <= INT32_MAX, "attention: {} CTAs exceed the grid limit", ctas);
  if (smem > 48 * 1024)
    VEOMNI_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  kernel<<<dim3(static_cast<unsigned>(ctas), static_cast<unsigned>(splits)), threads, smem, cuda_rt::stream()>>>(args);
  VEOMNI_CUDA_CHECK(cudaGetLastError());
}

template <typename T, typename Args>
void fill_common(Args& args, const Tensor& q, const Tensor& k, const Tensor& v, bool causal, float scale) {
  args.q = static_cast<const T*>(q.raw_data());
  args.k = static_cast<const T*>(k.raw_data());
  args.v = static_cast<const T*>(v.raw_data());
  args.total = q.dim(0);
  args.q_heads = static_cast<int>(q.dim(1));
  args.kv_heads = static_cast<int>(k.dim(1));
  args.group = args.q_heads / args.kv_heads;
  args.dim = static_cast<int>(q.dim(2));
  args.scale = scale;
  args.scale_log2 = scale * kLog2e;
  args.causal = causal;
}

// The tile list of one launch: its row blocks on the device, and the CTAs they make with `heads` heads.
struct Tiles {
  Tensor device;
  int64_t ctas;
  const Tile* data() const { return static_cast<const Tile*>(device.raw_data()); }
};

Tiles tiles_for(const std::vector<int32_t>& cu, int block, bool causal, bool queries, int heads, Device device) {
  const std::vector<Tile> tiles = make_tiles(cu, block, causal, queries);
  return {upload_tiles(tiles, device), static_cast<int64_t>(tiles.size()) * heads};
}

template <int DP>
void forward_simt(ForwardArgs<float> args, const std::vector<int32_t>& cu, Device device) {
  constexpr size_t smem = sizeof(float) * ((kSimtForwardRows + 2 * kSimtForwardKeys) * (DP + 1) +
                                           kSimtForwardRows * (kSimtForwardKeys + 1));
  const Tiles tiles = tiles_for(cu, kSimtForwardRows, args.causal, true, args.q_heads, device);
  args.tiles = tiles.data();
  launch(attention_forward_simt<DP>, tiles.ctas, 1, kSimtThreads, smem, args);
}

template <int DP>
void forward_mma(ForwardArgs<bf16_t> args, const std::vector<int32_t>& cu, Device device) {
  const Tiles tiles = tiles_for(cu, mma_forward_rows(DP), args.causal, true, args.q_heads, device);
  args.tiles = tiles.data();
  launch(attention_forward_mma<DP>, tiles.ctas, 1, kMmaForwardWarps * 32, mma_forward_smem<DP>(), args);
}

template <int DP>
void backward_simt(BackwardArgs<float> args, const std::vector<int32_t>& cu, Device device) {
  constexpr size_t smem = sizeof(float) * ((kSimtBackwardKeys * 2 + kSimtBackwardRows * 2) * (DP + 1) +
                                           2 * kSimtBackwardKeys * (kSimtBackwardRows + 1) + 2 * kSimtBackwardRows);
  const Tiles tiles = tiles_for(cu, kSimtBackwardKeys, args.causal, false, args.kv_heads, device);
  args.tiles = tiles.data();
  launch(attention_backward_simt<DP>, tiles.ctas, 1, kSimtThreads, smem, args);
}

template <int DP>
void backward_mma(BackwardArgs<bf16_t> args, const std::vector<int32_t>& cu, Device device) {
  // Two query stages while they fit beside the key tiles; head_dim 256 splits its dK/dV columns over two CTAs.
  constexpr int kStages = DP <= 128 ? 2 : 1;
  constexpr int kColumns = DP < kMmaSplitColumns ? DP : kMmaSplitColumns;
  constexpr int kWarps = mma_backward_warps(DP);
  const Tiles tiles = tiles_for(cu, 16 * kWarps, args.causal, false, args.kv_heads, device);
  args.tiles = tiles.data();
  launch(attention_backward_mma<DP, kColumns, kStages, kWarps>, tiles.ctas, DP / kColumns, kWarps * 32,
         mma_backward_smem<DP, kStages, kWarps>(), args);
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int32_t>& cu_seqlens,
                       bool causal, float scale, Tensor& out, Tensor& lse) {
  if (attention_forward_via_cudnn(q, k, v, cu_seqlens, causal, scale, out, lse)) return;
  const DType dtype = q.dtype();
  require_dtype("attention_forward", dtype, {&k, &v, &out});
  if (q.dim(0) == 0) return;
  const Device device = q.device();
  if (dtype == DType::F32) {
    ForwardArgs<float> args{};
    fill_common<float>(args, q, k, v, causal, scale);
    args.out = static_cast<float*>(out.raw_data());
    args.lse = static_cast<float*>(lse.raw_data());
    switch (padded_dim(args.dim, {32, 64, 128, 256})) {
      case 32:
        return forward_simt<32>(args, cu_seqlens, device);
      case 64:
        return forward_simt<64>(args, cu_seqlens, device);
      case 128:
        return forward_simt<128>(args, cu_seqlens, device);
      default:
        return forward_simt<256>(args, cu_seqlens, device);
    }
  }
  ForwardArgs<bf16_t> args{};
  fill_common<bf16_t>(args, q, k, v, causal, scale);
  args.out = static_cast<bf16_t*>(out.raw_data());
  args.lse = static_cast<float*>(lse.raw_data());
  args.vector_loads = args.dim % 8 == 0 && aligned16({&q, &k, &v});
  switch (padded_dim(args.dim, {64, 128, 256})) {
    case 64:
      return forward_mma<64>(args, cu_seqlens, device);
    case 128:
      return forward_mma<128>(args, cu_seqlens, device);
    default:
      return forward_mma<256>(args, cu_seqlens, device);
  }
}

void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const std::vector<int32_t>& cu_seqlens, bool causal, float scale, Tensor& dq,
                        Tensor& dk, Tensor& dv) {
  if (attention_backward_via_cudnn(dout, q, k, v, out, lse, cu_seqlens, causal, scale, dq, dk, dv)) return;
  const DType dtype = q.dtype();
  require_dtype("attention_backward", dtype, {&dout, &k, &v, &out, &dq, &dk, &dv});
  const int64_t total = q.dim(0), q_heads = q.dim(1), dim = q.dim(2);
  if (total == 0) return;
  const bool f32 = dtype == DType::F32;
  const int dp = padded_dim(dim, {32, 64, 128, 256});
  const Device device = q.device();
  cudaStream_t stream = cuda_rt::stream();

  Tensor delta = Tensor::empty({q_heads, total}, DType::F32, device);
  constexpr int kDeltaThreads = 256;
  const int64_t rows = total * q_heads;
  const int64_t delta_blocks = (rows + kDeltaThreads / 32 - 1) / (kDeltaThreads / 32);
  VEOMNI_CHECK(delta_blocks <= INT32_MAX, "attention_backward: {} rows are too many", rows);
  if (f32)
    attention_delta<<<static_cast<unsigned>(delta_blocks), kDeltaThreads, 0, stream>>>(
        static_cast<const float*>(dout.raw_data()), static_cast<const float*>(out.raw_data()),
        static_cast<float*>(delta.raw_data()), total, static_cast<int>(q_heads), static_cast<int>(dim));
  else
    attention_delta<<<static_cast<unsigned>(delta_blocks), kDeltaThreads, 0, stream>>>(
        static_cast<const bf16_t*>(dout.raw_data()), static_cast<const bf16_t*>(out.raw_data()),
        static_cast<float*>(delta.raw_data()), total, static_cast<int>(q_heads), static_cast<int>(dim));
  VEOMNI_CUDA_CHECK(cudaGetLastError());

  // f32 dq takes the atomics directly; bf16 dq is cast from an fp32 buffer.
  Tensor dq_accum = f32 ? dq : Tensor::empty(q.shape(), DType::F32, device);
  VEOMNI_CUDA_CHECK(cudaMemsetAsync(dq_accum.raw_data(), 0, dq_accum.nbytes(), stream));

  if (f32) {
    BackwardArgs<float> args{};
    fill_common<float>(args, q, k, v, causal, scale);
    args.dout = static_cast<const float*>(dout.raw_data());
    args.lse = static_cast<const float*>(lse.raw_data());
    args.delta = static_cast<const float*>(delta.raw_data());
    args.dq_accum = static_cast<float*>(dq_accum.raw_data());
    args.dk = static_cast<float*>(dk.raw_data());
    args.dv = static_cast<float*>(dv.raw_data());
    switch (dp) {
      case 32:
        return backward_simt<32>(args, cu_seqlens, device);
      case 64:
        return backward_simt<64>(args, cu_seqlens, device);
      case 128:
        return backward_simt<128>(args, cu_seqlens, device);
      default:
        return backward_simt<256>(args, cu_seqlens, device);
    }
  }
  BackwardArgs<bf16_t> args{};
  fill_common<bf16_t>(args, q, k, v, causal, scale);
  args.dout = static_cast<const bf16_t*>(dout.raw_data());
  args.lse = static_cast<const float*>(lse.raw_data());
  args.delta = static_cast<const float*>(delta.raw_data());
  args.dq_accum = static_cast<float*>(dq_accum.raw_data());
  args.dk = static_cast<bf16_t*>(dk.raw_data());
  args.dv = static_cast<bf16_t*>(dv.raw_data());
  args.vector_loads = dim % 8 == 0 && aligned16({&q, &k, &v, &dout});
  switch (dp) {
    case 32:
    case 64:
      backward_mma<64>(args, cu_seqlens, device);
      break;
    case 128:
      backward_mma<128>(args, cu_seqlens, device);
      break;
    default:
      backward_mma<256>(args, cu_seqlens, device);
      break;
  }
  const int64_t n = dq.numel();
  if (n == 0) return;
  const int64_t cast_blocks = std::min<int64_t>((n + 255) / 256, 65536);
  cast_to_bf16<<<static_cast<unsigned>(cast_blocks), 256, 0, stream>>>(static_cast<const float*>(dq_accum.raw_data()),
                                                                       static_cast<bf16_t*>(dq.raw_data()), n);
  VEOMNI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace veomni::ops::cuda
