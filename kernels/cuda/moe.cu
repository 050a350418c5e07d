// CUDA mixture-of-experts: the router (softmax in double and top-k by repeated warp arg-max, ties to the lower
// expert) and its backward, one warp per token; the permutation by expert as a stable radix sort of (expert, pair)
// keys, whose counts are the op's one read back to the host; the weighted gather back and the backward passes, one
// block per token summing its k rows in ascending row order, as the CPU backend does.
#include <cub/device/device_radix_sort.cuh>

#include <bit>
#include <climits>

#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = 256;

unsigned warp_blocks(int64_t rows) { return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

__device__ __forceinline__ int64_t warp_row() {
  return blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / kWarp;
}

// ---------------------------------------------------------------- router

// A candidate of the top-k: larger probability first, then the lower expert.
struct Pick {
  float p;
  int32_t e;
};

__device__ __forceinline__ bool before(Pick a, Pick b) { return a.p > b.p || (a.p == b.p && a.e < b.e); }

__device__ __forceinline__ Pick warp_best(Pick v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    Pick other{__shfl_xor_sync(0xffffffffu, v.p, offset), __shfl_xor_sync(0xffffffffu, v.e, offset)};
    if (before(other, v)) v = other;
  }
  return v;
}

__global__ void route_kernel(ConstFloats logits, int64_t n, int64_t experts, int64_t k, bool norm_topk_prob,
                             float* probs, int32_t* topk_idx, float* topk_weight) {
  const int64_t t = warp_row();
  if (t >= n) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t base = t * experts;
  float max = -INFINITY;
  for (int64_t e = lane; e < experts; e += kWarp) max = fmaxf(max, logits[base + e]);
  max = warp_max(max);
  double sum = 0.0;
  for (int64_t e = lane; e < experts; e += kWarp) sum += exp(static_cast<double>(logits[base + e]) - max);
  sum = warp_sum(sum);
  for (int64_t e = lane; e < experts; e += kWarp)
    probs[base + e] = static_cast<float>(exp(static_cast<double>(logits[base + e]) - max) / sum);
  __syncwarp();  // the probabilities written above are read by other lanes below

  // Slot j takes the best candidate ordered after slot j-1's pick, so no expert is taken twice.
  Pick prev{INFINITY, -1};
  double chosen = 0.0;
  for (int64_t j = 0; j < k; ++j) {
    Pick best{-INFINITY, INT_MAX};
    for (int64_t e = lane; e < experts; e += kWarp) {
      const Pick c{probs[base + e], static_cast<int32_t>(e)};
      if (before(prev, c) && before(c, best)) best = c;
    }
    best = warp_best(best);
    if (best.e >= experts) best = {0.0f, static_cast<int32_t>(j % experts)};  // only with NaN logits
    if (lane == 0) {
      topk_idx[t * k + j] = best.e;
      topk_weight[t * k + j] = best.p;
    }
    chosen += best.p;
    prev = best;
  }
  if (!norm_topk_prob) return;
  __syncwarp();
  for (int64_t j = lane; j < k; j += kWarp)
    topk_weight[t * k + j] = static_cast<float>(static_cast<double>(topk_weight[t * k + j]) / chosen);
}

// dL/dp from the top-k weights (through w_j = p_j / sum_chosen when renormalised) plus dprobs_extra, then through
// the softmax: dlogit_e = p_e * (dp_e - sum_f p_f dp_f).
__global__ void route_backward_kernel(const float* dtopk_weight, const float* dprobs_extra, const float* probs,
                                      const int32_t* topk_idx, int64_t n, int64_t experts, int64_t k,
                                      bool norm_topk_prob, Floats dlogits) {
  const int64_t t = warp_row();
  if (t >= n) return;
  const int lane = threadIdx.x % kWarp;
  const float* p = probs + t * experts;
  const float* g = dtopk_weight + t * k;
  const int32_t* idx = topk_idx + t * k;
  const auto valid = [&](int32_t e) { return e >= 0 && e < experts; };
  double chosen = 0.0, weighted = 0.0;
  if (norm_topk_prob) {
    for (int64_t j = 0; j < k; ++j)
      if (valid(idx[j])) chosen += p[idx[j]];
    for (int64_t j = 0; j < k; ++j)
      if (valid(idx[j])) weighted += static_cast<double>(g[j]) * (p[idx[j]] / chosen);
  }
  // Each lane keeps dp for its experts e = lane + 32 i in a loop recomputation rather than an array.
  const auto dp_of = [&](int64_t e) {
    double dp = dprobs_extra ? dprobs_extra[t * experts + e] : 0.0;
    for (int64_t j = 0; j < k; ++j)
      if (idx[j] == e) dp += norm_topk_prob ? (g[j] - weighted) / chosen : static_cast<double>(g[j]);
    return dp;
  };
  double mean = 0.0;
  for (int64_t e = lane; e < experts; e += kWarp) mean += static_cast<double>(p[e]) * dp_of(e);
  mean = warp_sum(mean);
  for (int64_t e = lane; e < experts; e += kWarp)
    dlogits.store(t * experts + e, static_cast<float>(p[e] * (dp_of(e) - mean)));
}

// ---------------------------------------------------------------- permutation

// counts[e] = pairs routed to e; the first pair with an expert outside [0, E) is recorded in *first_bad.
__global__ void count_experts(const int32_t* topk_idx, int64_t pairs, int64_t experts, unsigned long long* counts,
                              unsigned long long* first_bad, uint32_t* keys, int32_t* values) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < pairs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t e = topk_idx[i];
    if (e >= 0 && e < experts)
      atomicAdd(&counts[e], 1ull);
    else
      atomicMin(first_bad, static_cast<unsigned long long>(i));
    keys[i] = static_cast<uint32_t>(e);
    values[i] = static_cast<int32_t>(i);
  }
}

// Sorted position p holds pair sorted_pairs[p].
__global__ void map_rows(const int32_t* sorted_pairs, int64_t pairs, int32_t* row_map) {
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < pairs;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x)
    row_map[sorted_pairs[p]] = static_cast<int32_t>(p);
}

// permuted[p] = x[sorted_pairs[p] / k].
__global__ void place_rows(const int32_t* sorted_pairs, int64_t pairs, int64_t k, int64_t hidden, ConstFloats x,
                           Floats permuted) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < pairs * hidden;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = idx / hidden;
    const int64_t col = idx % hidden;
    permuted.store(idx, x[(sorted_pairs[p] / k) * hidden + col]);
  }
}

// The k rows of token t (and their slots) in ascending row order, into shared memory; rows outside [0, limit) are
// dropped (row_map does not come from moe_permute). Returns how many rows are kept. Runs on thread 0.
__device__ int sorted_rows(const int32_t* row_map, int64_t t, int64_t k, int64_t limit, int32_t* rows, int32_t* slots) {
  int count = 0;
  for (int64_t j = 0; j < k; ++j) {
    const int32_t r = row_map[t * k + j];
    if (r < 0 || r >= limit) continue;
    int pos = count++;
    while (pos > 0 && rows[pos - 1] > r) {
      rows[pos] = rows[pos - 1];
      slots[pos] = slots[pos - 1];
      --pos;
    }
    rows[pos] = r;
    slots[pos] = static_cast<int32_t>(j);
  }
  return count;
}

// out[t] = sum over the token's rows in ascending order of (weight ? weight[t, slot] : 1) * y[row]; one block per
// token. Serves moe_unpermute (weights) and moe_permute_backward (none).
__global__ void gather_sum(ConstFloats y, const int32_t* row_map, ConstFloats weight, bool weighted, int64_t k,
                           int64_t hidden, Floats out) {
  extern __shared__ int32_t shared[];
  __shared__ int kept;
  int32_t* rows = shared;
  int32_t* slots = shared + k;
  const int64_t t = blockIdx.x;
  const int64_t limit = static_cast<int64_t>(gridDim.x) * k;
  if (threadIdx.x == 0) kept = sorted_rows(row_map, t, k, limit, rows, slots);
  __syncthreads();
  for (int64_t col = threadIdx.x; col < hidden; col += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < kept; ++j) {
      const float v = y[static_cast<int64_t>(rows[j]) * hidden + col];
      acc += weighted ? weight[t * k + slots[j]] * v : v;
    }
    out.store(t * hidden + col, acc);
  }
}

// dy[row_map[t, j]] = w[t, j] * dout[t]; dtopk_weight[t, j] = <dout[t], y[row_map[t, j]]>; one block per token.
__global__ void unpermute_backward_kernel(ConstFloats dout, ConstFloats y, const int32_t* row_map, ConstFloats weight,
                                          int64_t k, int64_t hidden, Floats dy, Floats dtopk_weight) {
  __shared__ double scratch[kWarp];
  const int64_t t = blockIdx.x;
  const int64_t limit = static_cast<int64_t>(gridDim.x) * k;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t row = row_map[t * k + j];
    const bool valid = row >= 0 && row < limit;
    const float w = weight[t * k + j];
    double dot = 0.0;
    if (valid) {
      for (int64_t col = threadIdx.x; col < hidden; col += blockDim.x) {
        const float d = dout[t * hidden + col];
        dy.store(row * hidden + col, w * d);
        dot += static_cast<double>(d) * static_cast<double>(y[row * hidden + col]);
      }
    }
    dot = block_sum(dot, scratch);
    if (threadIdx.x == 0) dtopk_weight.store(t * k + j, static_cast<float>(dot));
  }
}

// ---------------------------------------------------------------- load-balancing statistics

// counts[e] += 1 for every (token, slot) pair of the first rows tokens routed to e (integers, exact in f32).
__global__ void slot_counts_kernel(const int32_t* topk_idx, int64_t pairs, float* counts) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < pairs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    atomicAdd(counts + topk_idx[i], 1.0f);
}

// dprobs[t, e] = t < rows ? dprob[e] : 0.
__global__ void aux_dprobs_kernel(const float* dprob, int64_t rows, int64_t n, int64_t experts, float* dprobs) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n * experts;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dprobs[i] = i / experts < rows ? dprob[i % experts] : 0.0f;
}

}  // namespace

// The probability sums are bias_grad's column sums (the same numbers the model summed before it kept them here).
void moe_router_stats(const Tensor& probs, const Tensor& topk_idx, int64_t rows, Tensor& stats) {
  const int64_t experts = probs.dim(1), pairs = rows * topk_idx.dim(1);
  const cudaStream_t stream = cuda_rt::stream();
  VEOMNI_CUDA_CHECK(cudaMemsetAsync(stats.raw_data(), 0, static_cast<size_t>(2 * experts) * sizeof(float), stream));
  if (pairs == 0) return;
  slot_counts_kernel<<<grid_for(pairs, kThreads), kThreads, 0, stream>>>(data_of<int32_t>(topk_idx), pairs,
                                                                         data_of<float>(stats));
  VEOMNI_CUDA_LAUNCH_CHECK();
  Tensor sums = stats.select(1);
  bias_grad(probs.slice(0, rows), sums);
}

void moe_aux_dprobs(const Tensor& dprob, int64_t rows, Tensor& dprobs) {
  const int64_t n = dprobs.dim(0), experts = dprobs.dim(1);
  if (n * experts == 0) return;
  aux_dprobs_kernel<<<grid_for(n * experts, kThreads), kThreads, 0, cuda_rt::stream()>>>(
      data_of<float>(dprob), rows, n, experts, data_of<float>(dprobs));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void moe_route(const Tensor& router_logits, int64_t k, bool norm_topk_prob, Tensor& probs, Tensor& topk_idx,
               Tensor& topk_weight) {
  const int64_t n = router_logits.dim(0), experts = router_logits.dim(1);
  if (n == 0) return;
  route_kernel<<<warp_blocks(n), kWarpsPerBlock * kWarp, 0, cuda_rt::stream()>>>(
      floats_of(router_logits), n, experts, k, norm_topk_prob, data_of<float>(probs), data_of<int32_t>(topk_idx),
      data_of<float>(topk_weight));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void moe_route_backward(const Tensor& dtopk_weight, const Tensor& dprobs_extra, const Tensor& probs,
                        const Tensor& topk_idx, bool norm_topk_prob, Tensor& dlogits) {
  const int64_t n = probs.dim(0), experts = probs.dim(1), k = topk_idx.dim(1);
  if (n == 0) return;
  route_backward_kernel<<<warp_blocks(n), kWarpsPerBlock * kWarp, 0, cuda_rt::stream()>>>(
      data_of<float>(dtopk_weight), dprobs_extra.defined() ? data_of<float>(dprobs_extra) : nullptr,
      data_of<float>(probs), data_of<int32_t>(topk_idx), n, experts, k, norm_topk_prob, floats_of(dlogits));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void moe_permute(const Tensor& x, const Tensor& topk_idx, int64_t num_experts, Tensor& permuted, Tensor& row_map,
                 std::vector<int64_t>& expert_counts) {
  const int64_t pairs = topk_idx.numel(), k = topk_idx.dim(1), hidden = x.dim(1);
  expert_counts.assign(static_cast<size_t>(num_experts), 0);
  if (pairs == 0) return;
  const Device device = x.device();
  const cudaStream_t stream = cuda_rt::stream();
  // counts[0, E) and the first bad pair at counts[E], as 8-byte words.
  Tensor counts = Tensor::empty({num_experts + 1}, DType::I64, device);
  auto* counts_p = data_of<unsigned long long>(counts);
  VEOMNI_CUDA_CHECK(cudaMemsetAsync(counts_p, 0, static_cast<size_t>(num_experts) * 8, stream));
  VEOMNI_CUDA_CHECK(cudaMemsetAsync(counts_p + num_experts, 0xff, 8, stream));
  Tensor buffer = Tensor::empty({4, pairs}, DType::I32, device);  // keys, values, sorted keys, sorted values
  auto* keys_in = data_of<uint32_t>(buffer);
  auto* values_in = data_of<int32_t>(buffer) + pairs;
  auto* keys_out = keys_in + 2 * pairs;
  auto* values_out = values_in + 2 * pairs;
  count_experts<<<grid_for(pairs, kThreads), kThreads, 0, stream>>>(data_of<int32_t>(topk_idx), pairs, num_experts,
                                                                    counts_p, counts_p + num_experts, keys_in,
                                                                    values_in);
  VEOMNI_CUDA_LAUNCH_CHECK();

  std::vector<unsigned long long> host(static_cast<size_t>(num_experts) + 1);
  cuda_rt::copy_to_host(host.data(), counts_p, host.size() * sizeof(unsigned long long));
  if (const unsigned long long bad = host.back(); bad != ULLONG_MAX) {
    int32_t value = 0;
    cuda_rt::copy_to_host(&value, data_of<int32_t>(topk_idx) + bad, sizeof value);
    VEOMNI_CHECK(false, "ops::moe_permute: topk_idx[{}] = {} is outside [0, {})", bad, value, num_experts);
  }
  for (int64_t e = 0; e < num_experts; ++e)
    expert_counts[static_cast<size_t>(e)] = static_cast<int64_t>(host[static_cast<size_t>(e)]);

  // Radix sort is stable: pairs of one expert keep their (token, slot) order.
  const int end_bit = std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(num_experts - 1))));
  const int items = static_cast<int>(pairs);
  size_t temp_bytes = 0;
  VEOMNI_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in, keys_out, values_in, values_out,
                                                    items, 0, end_bit, stream));
  Tensor temp = Tensor::empty({static_cast<int64_t>(std::max<size_t>(temp_bytes, 1))}, DType::U8, device);
  VEOMNI_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.raw_data(), temp_bytes, keys_in, keys_out, values_in,
                                                    values_out, items, 0, end_bit, stream));
  map_rows<<<grid_for(pairs, kThreads), kThreads, 0, stream>>>(values_out, pairs, data_of<int32_t>(row_map));
  VEOMNI_CUDA_LAUNCH_CHECK();
  if (hidden == 0) return;
  place_rows<<<grid_for(pairs * hidden, kThreads), kThreads, 0, stream>>>(values_out, pairs, k, hidden, floats_of(x),
                                                                          floats_of(permuted));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void moe_permute_backward(const Tensor& dpermuted, const Tensor& row_map, int64_t k, Tensor& dx) {
  const int64_t n = dx.dim(0), hidden = dx.dim(1);
  if (n == 0 || hidden == 0) return;
  const size_t shared = static_cast<size_t>(2 * k) * sizeof(int32_t);
  gather_sum<<<static_cast<unsigned>(n), kThreads, shared, cuda_rt::stream()>>>(
      floats_of(dpermuted), data_of<int32_t>(row_map), ConstFloats{}, false, k, hidden, floats_of(dx));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void moe_unpermute(const Tensor& y, const Tensor& row_map, const Tensor& topk_weight, Tensor& out) {
  const int64_t n = out.dim(0), hidden = out.dim(1), k = topk_weight.dim(1);
  if (n == 0 || hidden == 0) return;
  const size_t shared = static_cast<size_t>(2 * k) * sizeof(int32_t);
  gather_sum<<<static_cast<unsigned>(n), kThreads, shared, cuda_rt::stream()>>>(
      floats_of(y), data_of<int32_t>(row_map), floats_of(topk_weight), true, k, hidden, floats_of(out));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void moe_unpermute_backward(const Tensor& dout, const Tensor& y, const Tensor& row_map, const Tensor& topk_weight,
                            Tensor& dy, Tensor& dtopk_weight) {
  const int64_t n = dout.dim(0), hidden = dout.dim(1), k = topk_weight.dim(1);
  if (n == 0) return;
  unpermute_backward_kernel<<<static_cast<unsigned>(n), kThreads, 0, cuda_rt::stream()>>>(
      floats_of(dout), floats_of(y), data_of<int32_t>(row_map), floats_of(topk_weight), k, hidden, floats_of(dy),
      floats_of(dtopk_weight));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
