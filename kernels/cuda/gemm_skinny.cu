// The skinny GEMM of decoding: out [M, N] = x [M, K] W[N, K]^T in bf16 for M <= kSkinnyMaxRows. One warp per output
// column: the lanes read W's row in 16-byte chunks (8 bf16), each chunk once, and the matching chunks of every row of
// x (tiny, cached), accumulating in fp32; a warp sum per row, in a fixed order (deterministic). Each lane loads its
// first chunks of W before waiting for the kernel before (dependent_launch.cuh), so under OverlappedLaunches the
// weight stream starts while that kernel still runs. Options on the same loop: the RMSNorm of x's rows in front
// (each warp sums the squares of the rows it reads anyway), adding the product to out (beta 1: a residual add) and
// SwiGLU over a fused [gate; up] weight.
#include "kernels/cuda/gemm_skinny.h"

#include <cstdlib>
#include <cstring>
#include <type_traits>

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

// The first kHead of a lane's chunks of one weight row (chunk lane + i * kWarp), loaded into registers before the
// kernel waits for its predecessor: the weights are not written by the kernels before, so their stream starts while
// those still run.
template <int kHead>
struct WeightHead {
  uint4 chunk[kHead];

  __device__ __forceinline__ void load(const uint4* w_row, int64_t chunks, int lane) {
#pragma unroll
    for (int i = 0; i < kHead; ++i) {
      const int64_t c = lane + static_cast<int64_t>(i) * kWarp;
      chunk[i] = c < chunks ? __ldg(w_row + c) : make_uint4(0, 0, 0, 0);
    }
  }
};

// acc[r] += the lane's share of x[r, :] . w_row: its chunks in ascending order, the first kHead from `head`, the rest
// read here. The order, and so the bits, do not depend on kHead.
template <int kHead, bool kNorm>
__device__ __forceinline__ void dot_rows(const XRows<kNorm>& x, const uint4* w_row, const WeightHead<kHead>& head,
                                         int lane, float (&acc)[kSkinnyMaxRows]) {
  const int64_t chunks = x.k / kChunk;
#pragma unroll
  for (int i = 0; i < kHead; ++i) {
    const int64_t c = lane + static_cast<int64_t>(i) * kWarp;
    if (c < chunks) accumulate_chunk(x, head.chunk[i], c, acc);
  }
#pragma unroll 4
  for (int64_t c = lane + static_cast<int64_t>(kHead) * kWarp; c < chunks; c += kWarp)
    accumulate_chunk(x, __ldg(w_row + c), c, acc);
}

// out[r, column] = x[r] . W[column] (+ out[r, column] when kAccumulate: one rounding of the fp32 sum).
template <bool kAccumulate, bool kNorm, int kHead>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp) skinny_matmul_kernel(SkinnyArgs a) {
  let_next_kernel_launch();
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t column = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const uint4* w_row = reinterpret_cast<const uint4*>(a.w + min(column, a.n - 1) * a.k);
  WeightHead<kHead> head;
  if (column < a.n) head.load(w_row, a.k / kChunk, lane);
  wait_for_previous_kernel();
  if (column >= a.n) return;
  const XRows<kNorm> x(a.x, a.gain, a.eps, a.m, a.k, lane);
  float acc[kSkinnyMaxRows] = {};
  dot_rows(x, w_row, head, lane, acc);
  for (int r = 0; r < kSkinnyMaxRows; ++r) {
    if (r >= a.m) break;
    const float sum = warp_sum(acc[r]);
    if (lane != 0) continue;
    __nv_bfloat16& out = a.out[r * a.n + column];
    out = column_result(sum, kAccumulate, kAccumulate ? out : __nv_bfloat16());
  }
}

// out[r, j] = silu(g) * u with g = x[r] . W[j] and u = x[r] . W[I + j], each rounded to bf16 first: the bits of the
// skinny GEMM into gate_up followed by swiglu_fused_forward (kernels/cuda/swiglu.cu's fp32 math).
template <bool kNorm, int kHead>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp) skinny_swiglu_kernel(SkinnyArgs a) {
  let_next_kernel_launch();
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t column = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int64_t gate_column = min(column, a.n - 1);
  const uint4* gate_row = reinterpret_cast<const uint4*>(a.w + gate_column * a.k);
  const uint4* up_row = reinterpret_cast<const uint4*>(a.w + (a.n + gate_column) * a.k);
  WeightHead<kHead> gate_head, up_head;
  if (column < a.n) {
    gate_head.load(gate_row, a.k / kChunk, lane);
    up_head.load(up_row, a.k / kChunk, lane);
  }
  wait_for_previous_kernel();
  if (column >= a.n) return;
  const XRows<kNorm> x(a.x, a.gain, a.eps, a.m, a.k, lane);
  float gate[kSkinnyMaxRows] = {};
  float up[kSkinnyMaxRows] = {};
  dot_rows(x, gate_row, gate_head, lane, gate);
  dot_rows(x, up_row, up_head, lane, up);
  for (int r = 0; r < kSkinnyMaxRows; ++r) {
    if (r >= a.m) break;
    const __nv_bfloat16 act = swiglu_result(warp_sum(gate[r]), warp_sum(up[r]));
    if (lane == 0) a.out[r * a.n + column] = act;
  }
}

// Calls launch(std::integral_constant<int, H>) with H the head size for rows of k elements: the lane's whole share
// of the row, rounded up to 4 chunks, but at most kMost (the rest is read after the wait).
template <int kMost, typename Launch>
void with_head_for(int64_t k, Launch&& launch) {
  const int64_t per_lane = (k / kChunk + kWarp - 1) / kWarp;
  if (per_lane <= 4) return launch(std::integral_constant<int, 4>{});
  if constexpr (kMost == 8) {
    launch(std::integral_constant<int, 8>{});
  } else {
    if (per_lane <= 8) return launch(std::integral_constant<int, 8>{});
    if (per_lane <= 12) return launch(std::integral_constant<int, 12>{});
    launch(std::integral_constant<int, 16>{});
  }
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

unsigned blocks_for(int64_t columns) { return static_cast<unsigned>((columns + kWarpsPerBlock - 1) / kWarpsPerBlock); }

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
  with_norm(gain != nullptr, [&](auto norm) {
    constexpr bool kNorm = decltype(norm)::value;
    with_head_for<16>(args.k, [&](auto head) {
      constexpr int kHead = decltype(head)::value;
      const auto kernel =
          accumulate ? skinny_matmul_kernel<true, kNorm, kHead> : skinny_matmul_kernel<false, kNorm, kHead>;
      launch_overlapped(kernel, dim3(blocks_for(args.n)), dim3(kWarpsPerBlock * kWarp), 0, args);
    });
  });
}

bool skinny_swiglu_applies(const Tensor& x, const Tensor& gate_up, const Tensor& out, const Tensor* gain) {
  return skinny_operands(x, gate_up, out) && aligned16(out) && skinny_gain(gain, x);
}

void skinny_swiglu(const Tensor& x, const Tensor& gate_up, Tensor& out, const Tensor* gain, float eps) {
  const SkinnyArgs args = args_of(x, gain, eps, gate_up, out, gate_up.dim(0) / 2);
  with_norm(gain != nullptr, [&](auto norm) {
    with_head_for<8>(args.k, [&](auto head) {
      launch_overlapped(skinny_swiglu_kernel<decltype(norm)::value, decltype(head)::value>, dim3(blocks_for(args.n)),
                        dim3(kWarpsPerBlock * kWarp), 0, args);
    });
  });
}

}  // namespace veomni::ops::cuda
