// CPU MoE: softmax router with top-k (ties to the lower expert), a stable counting sort of (token, slot) pairs by
// expert, and the weighted gather back. A token's k expert outputs are summed in ascending expert order (the order
// of the permuted rows), the order in which HF's expert loop index_add_s them into zeros.
#include "kernels/cpu/ops_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels/cpu/index_checks.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_loops.h"

namespace veomni::ops::cpu {
namespace {

// Softmax of one row in fp32 output, the exponentials and their sum in double.
void softmax_row(int64_t n, const float* x, float* p) {
  const double max = *std::max_element(x, x + n);
  double sum = 0.0;
  for (int64_t e = 0; e < n; ++e) sum += std::exp(static_cast<double>(x[e]) - max);
  for (int64_t e = 0; e < n; ++e) p[e] = static_cast<float>(std::exp(static_cast<double>(x[e]) - max) / sum);
}

// The k largest of p in descending order; among equal values the lower index comes first.
void top_k(int64_t n, const float* p, int64_t k, int32_t* idx) {
  thread_local std::vector<int32_t> order;
  order.resize(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  std::copy(order.begin(), order.begin() + k, idx);
}

// The slots of token t in ascending order of their permuted row, i.e. of their expert.
void slots_by_row(const int32_t* map, int64_t t, int64_t k, int64_t* slots) {
  std::iota(slots, slots + k, int64_t{0});
  std::sort(slots, slots + k, [&](int64_t a, int64_t b) { return map[t * k + a] < map[t * k + b]; });
}

}  // namespace

void moe_route(const Tensor& router_logits, int64_t k, bool norm_topk_prob, Tensor& probs, Tensor& topk_idx,
               Tensor& topk_weight) {
  const int64_t n = router_logits.dim(0);
  const int64_t experts = router_logits.dim(1);
  const float* x = router_logits.data<float>();
  float* p = probs.data<float>();
  int32_t* idx = topk_idx.data<int32_t>();
  float* w = topk_weight.data<float>();
  parallel_for(n, 40 * experts, [&](int64_t t) {
    float* pt = p + t * experts;
    int32_t* it = idx + t * k;
    float* wt = w + t * k;
    softmax_row(experts, x + t * experts, pt);
    top_k(experts, pt, k, it);
    double chosen = 0.0;
    for (int64_t j = 0; j < k; ++j) chosen += pt[it[j]];
    for (int64_t j = 0; j < k; ++j)
      wt[j] = norm_topk_prob ? static_cast<float>(static_cast<double>(pt[it[j]]) / chosen) : pt[it[j]];
  });
}

// dL/dp from the top-k weights (through the renormalisation w_j = p_j / sum when asked) plus dprobs_extra, then
// through the softmax: dlogit_e = p_e * (dp_e - sum_f p_f dp_f).
void moe_route_backward(const Tensor& dtopk_weight, const Tensor& dprobs_extra, const Tensor& probs,
                        const Tensor& topk_idx, bool norm_topk_prob, Tensor& dlogits) {
  const int64_t n = probs.dim(0);
  const int64_t experts = probs.dim(1);
  check_experts_in_range("moe_route_backward", topk_idx, experts);
  const int64_t k = topk_idx.dim(1);
  const float* dw = dtopk_weight.data<float>();
  const float* extra = dprobs_extra.defined() ? dprobs_extra.data<float>() : nullptr;
  const float* p = probs.data<float>();
  const int32_t* idx = topk_idx.data<int32_t>();
  float* dl = dlogits.data<float>();
  parallel_for(n, 10 * experts, [&](int64_t t) {
    const float* pt = p + t * experts;
    const float* gt = dw + t * k;
    const int32_t* it = idx + t * k;
    thread_local std::vector<double> dp;
    dp.assign(static_cast<size_t>(experts), 0.0);
    if (extra)
      for (int64_t e = 0; e < experts; ++e) dp[static_cast<size_t>(e)] = extra[t * experts + e];
    if (norm_topk_prob) {
      double chosen = 0.0, weighted = 0.0;
      for (int64_t j = 0; j < k; ++j) chosen += pt[it[j]];
      for (int64_t j = 0; j < k; ++j) weighted += static_cast<double>(gt[j]) * (pt[it[j]] / chosen);
      for (int64_t j = 0; j < k; ++j) dp[static_cast<size_t>(it[j])] += (gt[j] - weighted) / chosen;
    } else {
      for (int64_t j = 0; j < k; ++j) dp[static_cast<size_t>(it[j])] += gt[j];
    }
    double mean = 0.0;
    for (int64_t e = 0; e < experts; ++e) mean += static_cast<double>(pt[e]) * dp[static_cast<size_t>(e)];
    for (int64_t e = 0; e < experts; ++e)
      dl[t * experts + e] = static_cast<float>(pt[e] * (dp[static_cast<size_t>(e)] - mean));
  });
}

// The probability sums are bias_grad's column sums, so the statistics match those the CPU model summed before.
void moe_router_stats(const Tensor& probs, const Tensor& topk_idx, int64_t rows, Tensor& stats) {
  const int64_t experts = probs.dim(1);
  check_experts_in_range("moe_router_stats", topk_idx.slice(0, rows), experts);
  float* counts = stats.data<float>();
  std::fill(counts, counts + 2 * experts, 0.0f);
  const int32_t* idx = topk_idx.data<int32_t>();
  for (int64_t i = 0; i < rows * topk_idx.dim(1); ++i) counts[idx[i]] += 1.0f;
  if (rows == 0) return;
  Tensor sums = stats.select(1);
  bias_grad(probs.slice(0, rows), sums);
}

void moe_aux_dprobs(const Tensor& dprob, int64_t rows, Tensor& dprobs) {
  const int64_t n = dprobs.dim(0), experts = dprobs.dim(1);
  const float* g = dprob.data<float>();
  float* out = dprobs.data<float>();
  for (int64_t t = 0; t < n; ++t)
    for (int64_t e = 0; e < experts; ++e) out[t * experts + e] = t < rows ? g[e] : 0.0f;
}

void moe_permute(const Tensor& x, const Tensor& topk_idx, int64_t num_experts, Tensor& permuted, Tensor& row_map,
                 std::vector<int64_t>& expert_counts) {
  check_experts_in_range("moe_permute", topk_idx, num_experts);
  const int64_t n = topk_idx.dim(0);
  const int64_t k = topk_idx.dim(1);
  const int64_t hidden = x.dim(1);
  const int32_t* idx = topk_idx.data<int32_t>();
  int32_t* map = row_map.data<int32_t>();
  expert_counts.assign(static_cast<size_t>(num_experts), 0);
  for (int64_t i = 0; i < n * k; ++i) ++expert_counts[static_cast<size_t>(idx[i])];
  std::vector<int64_t> next(static_cast<size_t>(num_experts), 0);
  std::exclusive_scan(expert_counts.begin(), expert_counts.end(), next.begin(), int64_t{0});
  // Visiting pairs in (token, slot) order makes the sort stable: by expert, then token, then slot.
  for (int64_t i = 0; i < n * k; ++i) map[i] = static_cast<int32_t>(next[static_cast<size_t>(idx[i])]++);
  const float* src = x.data<float>();
  float* dst = permuted.data<float>();
  parallel_for(n * k, hidden, [&](int64_t i) {
    std::memcpy(dst + map[i] * hidden, src + (i / k) * hidden, static_cast<size_t>(hidden) * sizeof(float));
  });
}

void moe_permute_backward(const Tensor& dpermuted, const Tensor& row_map, int64_t k, Tensor& dx) {
  check_row_map("moe_permute_backward", row_map);
  const int64_t n = dx.dim(0);
  const int64_t hidden = dx.dim(1);
  const int32_t* map = row_map.data<int32_t>();
  const float* dp = dpermuted.data<float>();
  float* d = dx.data<float>();
  parallel_for(n, k * hidden, [&](int64_t t) {
    thread_local std::vector<int64_t> slots;
    slots.resize(static_cast<size_t>(k));
    slots_by_row(map, t, k, slots.data());
    float* out = d + t * hidden;
    std::fill(out, out + hidden, 0.0f);
    for (int64_t j : slots) axpy(hidden, 1.0f, dp + map[t * k + j] * hidden, out);
  });
}

void moe_unpermute(const Tensor& y, const Tensor& row_map, const Tensor& topk_weight, Tensor& out) {
  check_row_map("moe_unpermute", row_map);
  const int64_t n = out.dim(0);
  const int64_t hidden = out.dim(1);
  const int64_t k = topk_weight.dim(1);
  const int32_t* map = row_map.data<int32_t>();
  const float* yp = y.data<float>();
  const float* w = topk_weight.data<float>();
  float* o = out.data<float>();
  parallel_for(n, 2 * k * hidden, [&](int64_t t) {
    thread_local std::vector<int64_t> slots;
    slots.resize(static_cast<size_t>(k));
    slots_by_row(map, t, k, slots.data());
    float* row = o + t * hidden;
    std::fill(row, row + hidden, 0.0f);
    for (int64_t j : slots) axpy(hidden, w[t * k + j], yp + map[t * k + j] * hidden, row);
  });
}

void moe_unpermute_backward(const Tensor& dout, const Tensor& y, const Tensor& row_map, const Tensor& topk_weight,
                            Tensor& dy, Tensor& dtopk_weight) {
  check_row_map("moe_unpermute_backward", row_map);
  const int64_t n = dout.dim(0);
  const int64_t hidden = dout.dim(1);
  const int64_t k = topk_weight.dim(1);
  const int32_t* map = row_map.data<int32_t>();
  const float* d = dout.data<float>();
  const float* yp = y.data<float>();
  const float* w = topk_weight.data<float>();
  float* dyp = dy.data<float>();
  float* dw = dtopk_weight.data<float>();
  parallel_for(n, 3 * k * hidden, [&](int64_t t) {
    const float* dt = d + t * hidden;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t row = map[t * k + j];
      const float wt = w[t * k + j];
      float* dst = dyp + row * hidden;
      for_each_lane(hidden, [&](int64_t i) { dst[i] = wt * dt[i]; });
      dw[t * k + j] = static_cast<float>(dot_f64(hidden, dt, yp + row * hidden));
    }
  });
}

}  // namespace veomni::ops::cpu
