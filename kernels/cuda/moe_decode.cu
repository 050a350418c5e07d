// A decode step's MoE experts on the device (ops::moe_decode_experts on CUDA), with no read back to the host so that
// a recorded graph holds the step: a one-block plan sorts the step's (row, slot) pairs by expert as moe_permute's
// stable sort does and lists the routed experts; a GEMV kernel per weight (gate|up with SwiGLU, then down) runs one
// block row per routed expert, each warp one output column, reading the column's weight row once for all the
// expert's rows; moe_unpermute's weighted gather adds each row's pairs in ascending position, i.e. expert, order.
// Decode steps have few rows, so the expert's rows sit in registers as the weights stream past; the grouped GEMMs of
// moe_permute's path need the counts on the host to size their groups, which is what a graph cannot do.
#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/skinny_dot.cuh"

namespace veomni::ops::cuda {
namespace {

constexpr int kPlanThreads = 1024;
constexpr int kWarpsPerBlock = 8;
constexpr int kRowsPerPass = 8;  // rows of one expert a warp accumulates at once

// The plan of a step's pairs, i32 device arrays. A pair is (row, slot): index row * k + slot of topk_idx.
struct Plan {
  int32_t* sorted_pairs;  // [P]: sorted position p holds pair sorted_pairs[p]
  int32_t* row_map;       // [P]: pair -> sorted position; -1 for a pair whose expert is outside [0, E)
  int32_t* group_expert;  // [P]: the g-th routed expert in ascending order, -1 past the last
  int32_t* group_begin;   // [P + 1]: group g holds sorted positions [group_begin[g], group_begin[g + 1])
};

// One block. counts (shared, E ints) become each expert's first sorted position; a pair's position is that plus the
// number of earlier pairs of its expert: the order of moe_permute's stable sort of (expert, pair) keys.
__global__ void __launch_bounds__(kPlanThreads)
    plan_kernel(const int32_t* topk_idx, int64_t pairs, int64_t experts, Plan plan) {
  extern __shared__ int32_t counts[];
  for (int64_t e = threadIdx.x; e < experts; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < pairs; i += blockDim.x) {
    const int32_t e = topk_idx[i];
    if (e >= 0 && e < experts) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t offset = 0, groups = 0;
    for (int64_t e = 0; e < experts; ++e) {
      const int32_t n = counts[e];
      counts[e] = offset;
      if (n > 0) {
        plan.group_expert[groups] = static_cast<int32_t>(e);
        plan.group_begin[groups] = offset;
        ++groups;
      }
      offset += n;
    }
    for (int64_t g = groups; g < pairs; ++g) {
      plan.group_expert[g] = -1;
      plan.group_begin[g] = offset;
    }
    plan.group_begin[pairs] = offset;
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < pairs; i += blockDim.x) {
    const int32_t e = topk_idx[i];
    if (e < 0 || e >= experts) {
      plan.row_map[i] = -1;
      continue;
    }
    int32_t earlier = 0;
    for (int64_t j = 0; j < i; ++j) earlier += topk_idx[j] == e ? 1 : 0;
    const int32_t p = counts[e] + earlier;
    plan.sorted_pairs[p] = static_cast<int32_t>(i);
    plan.row_map[i] = p;
  }
}

// acc[r] += the lane's share of rows[r] . w for r < n: 16-byte chunks (kVector: k a multiple of a chunk, every row
// 16-byte aligned) or single elements, lane l taking l, l + 32, ... in ascending order.
template <typename T, bool kVector>
__device__ __forceinline__ void dot_rows(const T* w, const T* const (&rows)[kRowsPerPass], int n, int64_t k, int lane,
                                         float (&acc)[kRowsPerPass]) {
  if constexpr (kVector) {
    constexpr int P = packed::kPer16<T>;
#pragma unroll 4
    for (int64_t c = lane; c < k / P; c += kWarp) {
      float wf[P];
      packed::load<T, P>(w + c * P, wf);
#pragma unroll
      for (int r = 0; r < kRowsPerPass; ++r) {
        if (r >= n) break;
        float xf[P];
        packed::load<T, P>(rows[r] + c * P, xf);
#pragma unroll
        for (int j = 0; j < P; ++j) acc[r] += wf[j] * xf[j];
      }
    }
  } else {
    for (int64_t c = lane; c < k; c += kWarp) {
      const float wv = packed::as_float(w[c]);
#pragma unroll
      for (int r = 0; r < kRowsPerPass; ++r) {
        if (r >= n) break;
        acc[r] += wv * packed::as_float(rows[r][c]);
      }
    }
  }
}

// The block's group (blockIdx.y: its routed expert and sorted positions; the grid holds at least as many as there are
// routed experts) and the warp's output column, -1 when there is none (past the last routed expert or the last
// column).
struct GroupColumn {
  int32_t expert = -1, begin = 0, end = 0;
  int64_t column = -1;
};

__device__ __forceinline__ GroupColumn group_column(const Plan& plan, int64_t columns) {
  GroupColumn gc;
  const int64_t g = blockIdx.y;
  gc.expert = plan.group_expert[g];
  gc.begin = plan.group_begin[g];
  gc.end = plan.group_begin[g + 1];
  const int64_t column = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  gc.column = gc.expert < 0 || column >= columns ? -1 : column;
  return gc;
}

// act[p, c] = SwiGLU(x[row of p] . gate_e[c], x[row of p] . up_e[c]) for the sorted positions p of expert e.
template <typename T, bool kVector>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp)
    gate_up_kernel(const T* x, const T* gate_up, T* act, Plan plan, int64_t k, int64_t hidden, int64_t inter) {
  const GroupColumn gc = group_column(plan, inter);
  if (gc.column < 0) return;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const T* w = gate_up + static_cast<int64_t>(gc.expert) * 2 * inter * hidden;
  const T* gate_row = w + gc.column * hidden;
  const T* up_row = w + (inter + gc.column) * hidden;
  for (int32_t first = gc.begin; first < gc.end; first += kRowsPerPass) {
    const int n = min(kRowsPerPass, gc.end - first);
    const T* rows[kRowsPerPass];
#pragma unroll
    for (int r = 0; r < kRowsPerPass; ++r) rows[r] = r < n ? x + (plan.sorted_pairs[first + r] / k) * hidden : x;
    float gate[kRowsPerPass] = {}, up[kRowsPerPass] = {};
    dot_rows<T, kVector>(gate_row, rows, n, hidden, lane, gate);
    dot_rows<T, kVector>(up_row, rows, n, hidden, lane, up);
#pragma unroll
    for (int r = 0; r < kRowsPerPass; ++r) {
      if (r >= n) break;
      const T value = swiglu_result<T>(warp_sum(gate[r]), warp_sum(up[r]));
      if (lane == 0) act[static_cast<int64_t>(first + r) * inter + gc.column] = value;
    }
  }
}

// y[p, c] = act[p] . down_e[c] for the sorted positions p of expert e (act's rows are consecutive).
template <typename T, bool kVector>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp)
    down_kernel(const T* act, const T* down, T* y, Plan plan, int64_t hidden, int64_t inter) {
  const GroupColumn gc = group_column(plan, hidden);
  if (gc.column < 0) return;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const T* w_row = down + (static_cast<int64_t>(gc.expert) * hidden + gc.column) * inter;
  for (int32_t first = gc.begin; first < gc.end; first += kRowsPerPass) {
    const int n = min(kRowsPerPass, gc.end - first);
    const T* rows[kRowsPerPass];
#pragma unroll
    for (int r = 0; r < kRowsPerPass; ++r) rows[r] = act + static_cast<int64_t>(first + (r < n ? r : 0)) * inter;
    float acc[kRowsPerPass] = {};
    dot_rows<T, kVector>(w_row, rows, n, inter, lane, acc);
#pragma unroll
    for (int r = 0; r < kRowsPerPass; ++r) {
      if (r >= n) break;
      const float sum = warp_sum(acc[r]);
      if (lane == 0) y[static_cast<int64_t>(first + r) * hidden + gc.column] = packed::rounded<T>(sum);
    }
  }
}

// Whether the 16-byte path takes these operands: rows of whole chunks, every base 16-byte aligned.
template <typename T>
bool vector_path(const Tensor& x, const Tensor& gate_up, const Tensor& down, const Tensor& act, const Tensor& y) {
  constexpr int64_t P = packed::kPer16<T>;
  const int64_t hidden = x.dim(1), inter = down.dim(2);
  if (hidden % P != 0 || inter % P != 0) return false;
  for (const Tensor* t : {&x, &gate_up, &down, &act, &y})
    if (!packed::aligned16(t->raw_data())) return false;
  return true;
}

unsigned column_blocks(int64_t columns) {
  return static_cast<unsigned>((columns + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

void moe_decode_experts(const Tensor& x, const Tensor& topk_idx, const Tensor& topk_weight, const Tensor& gate_up,
                        const Tensor& down, Tensor& out) {
  const int64_t n = x.dim(0), hidden = x.dim(1), k = topk_idx.dim(1), pairs = n * k;
  const int64_t experts = gate_up.dim(0), inter = down.dim(2);
  if (n == 0 || hidden == 0) return;
  const Device device = x.device();
  const cudaStream_t stream = cuda_rt::stream();
  Tensor plan_buffer = Tensor::empty({4 * pairs + 1}, DType::I32, device);
  int32_t* base = data_of<int32_t>(plan_buffer);
  const Plan plan{base, base + pairs, base + 2 * pairs, base + 3 * pairs};
  const size_t shared = static_cast<size_t>(experts) * sizeof(int32_t);
  plan_kernel<<<1, kPlanThreads, shared, stream>>>(data_of<int32_t>(topk_idx), pairs, experts, plan);
  VEOMNI_CUDA_LAUNCH_CHECK();

  Tensor act = Tensor::empty({pairs, inter}, x.dtype(), device);
  Tensor y = Tensor::empty({pairs, hidden}, x.dtype(), device);
  packed::with_float_type(x.dtype(), [&](auto t_tag) {
    using T = decltype(t_tag);
    // A block row per routed expert: there are at most min(pairs, experts) of them.
    const unsigned groups = static_cast<unsigned>(std::min(pairs, experts));
    const auto run = [&](auto vector) {
      constexpr bool kVector = decltype(vector)::value;
      gate_up_kernel<T, kVector>
          <<<dim3(column_blocks(inter), groups), kWarpsPerBlock * kWarp, 0, stream>>>(
              data_of<const T>(x), data_of<const T>(gate_up), data_of<T>(act), plan, k, hidden, inter);
      VEOMNI_CUDA_LAUNCH_CHECK();
      down_kernel<T, kVector>
          <<<dim3(column_blocks(hidden), groups), kWarpsPerBlock * kWarp, 0, stream>>>(
              data_of<const T>(act), data_of<const T>(down), data_of<T>(y), plan, hidden, inter);
      VEOMNI_CUDA_LAUNCH_CHECK();
    };
    if (vector_path<T>(x, gate_up, down, act, y))
      run(std::true_type{});
    else
      run(std::false_type{});
  });
  const Tensor row_map = plan_buffer.slice(pairs, 2 * pairs);
  moe_unpermute(y, row_map, topk_weight, out);
}

}  // namespace veomni::ops::cuda
