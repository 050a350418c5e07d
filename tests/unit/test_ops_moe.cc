// Tests of the MoE ops: router softmax/top-k (ties, renormalisation) and its backward, the stable permutation by
// expert, the weighted un-permutation with its gradients, and a decode step's experts (moe_decode_experts).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/decode_ops.h"
#include "kernels/ops.h"
#include "test_ops_util.h"

using namespace veomni;
using namespace veomni::test_ops;

namespace {

struct Route {
  Tensor probs, idx, weight;
};

Route route(const Tensor& logits, int64_t k, bool norm) {
  const int64_t n = logits.dim(0), e = logits.dim(1);
  Route r{Tensor::empty({n, e}, DType::F32), Tensor::empty({n, k}, DType::I32), Tensor::empty({n, k}, DType::F32)};
  ops::moe_route(logits, k, norm, r.probs, r.idx, r.weight);
  return r;
}

// moe_decode_experts by its definition, in double: each row's pairs in ascending expert order, each adding its weight
// times down_e(silu(gate_e x) * (up_e x)).
Doubles decode_experts_reference(const Tensor& x, const Tensor& idx, const Tensor& weight, const Tensor& gate_up,
                                 const Tensor& down) {
  const int64_t n = x.dim(0), h = x.dim(1), k = idx.dim(1), inter = down.dim(2);
  const float* xs = x.data<float>();
  const float* gu = gate_up.data<float>();
  const float* dw = down.data<float>();
  Doubles out(static_cast<size_t>(n * h), 0.0);
  for (int64_t t = 0; t < n; ++t) {
    std::vector<int64_t> slots(static_cast<size_t>(k));
    std::iota(slots.begin(), slots.end(), 0);
    std::sort(slots.begin(), slots.end(),
              [&](int64_t a, int64_t b) { return idx.data<int32_t>()[t * k + a] < idx.data<int32_t>()[t * k + b]; });
    for (int64_t j : slots) {
      const int64_t e = idx.data<int32_t>()[t * k + j];
      std::vector<double> act(static_cast<size_t>(inter));
      for (int64_t c = 0; c < inter; ++c) {
        double g = 0.0, u = 0.0;
        for (int64_t i = 0; i < h; ++i) {
          g += static_cast<double>(gu[(e * 2 * inter + c) * h + i]) * xs[t * h + i];
          u += static_cast<double>(gu[(e * 2 * inter + inter + c) * h + i]) * xs[t * h + i];
        }
        act[static_cast<size_t>(c)] = g / (1.0 + std::exp(-g)) * u;
      }
      for (int64_t c = 0; c < h; ++c) {
        double y = 0.0;
        for (int64_t i = 0; i < inter; ++i)
          y += static_cast<double>(dw[(e * h + c) * inter + i]) * act[static_cast<size_t>(i)];
        out[static_cast<size_t>(t * h + c)] += weight.data<float>()[t * k + j] * y;
      }
    }
  }
  return out;
}

}  // namespace

TEST(OpsMoe, DecodeExpertsAddEachRowsExpertsWeighted) {
  std::mt19937 rng(79);
  const int64_t n = 5, h = 12, inter = 6, e = 7, k = 3;
  const Tensor x = random_f32({n, h}, rng);
  const Tensor gate_up = random_f32({e, 2 * inter, h}, rng), down = random_f32({e, h, inter}, rng);
  const Route r = route(random_f32({n, e}, rng, -3.0f, 3.0f), k, true);
  Tensor out = Tensor::empty({n, h}, DType::F32);
  ops::moe_decode_experts(x, r.idx, r.weight, gate_up, down, out);
  EXPECT_TRUE(all_close(out, decode_experts_reference(x, r.idx, r.weight, gate_up, down), 1e-5, 1e-6));

  // Two rows on one expert, and a row whose slots list the experts in descending order.
  const Tensor idx = Tensor::from_vector<int32_t>({6, 2, 0, 2, 4, 1, 0, 1, 3, 5, 6, 2, 1, 3, 5}, {n, k});
  ops::moe_decode_experts(x, idx, r.weight, gate_up, down, out);
  EXPECT_TRUE(all_close(out, decode_experts_reference(x, idx, r.weight, gate_up, down), 1e-5, 1e-6));
}

TEST(OpsMoe, DecodeExpertsRejectBadArguments) {
  const int64_t n = 2, h = 4, inter = 2, e = 3, k = 2;
  const Tensor x = Tensor::zeros({n, h}, DType::F32), weight = Tensor::zeros({n, k}, DType::F32);
  const Tensor gate_up = Tensor::zeros({e, 2 * inter, h}, DType::F32), down = Tensor::zeros({e, h, inter}, DType::F32);
  Tensor out = Tensor::zeros({n, h}, DType::F32);
  EXPECT_NO_THROW(
      ops::moe_decode_experts(x, Tensor::from_vector<int32_t>({0, 1, 2, 0}, {n, k}), weight, gate_up, down, out));
  // Expert 3 of 3.
  EXPECT_THROW(
      ops::moe_decode_experts(x, Tensor::from_vector<int32_t>({0, 1, 3, 0}, {n, k}), weight, gate_up, down, out),
      Error);
  const Tensor idx = Tensor::from_vector<int32_t>({0, 1, 2, 0}, {n, k});
  const Tensor odd_down = Tensor::zeros({e, h, inter + 1}, DType::F32);
  EXPECT_THROW(ops::moe_decode_experts(x, idx, weight, gate_up, odd_down, out), Error);
  const Tensor bf16_weight = Tensor::zeros({n, k}, DType::BF16);
  EXPECT_THROW(ops::moe_decode_experts(x, idx, bf16_weight, gate_up, down, out), Error);
  Tensor short_out = Tensor::zeros({n, h - 1}, DType::F32);
  EXPECT_THROW(ops::moe_decode_experts(x, idx, weight, gate_up, down, short_out), Error);
}

TEST(OpsMoe, RouteSoftmaxTopkAndRenormalisation) {
  std::mt19937 rng(71);
  const int64_t n = 17, e = 9, k = 3;
  const Tensor logits = random_f32({n, e}, rng, -3.0f, 3.0f);
  for (bool norm : {false, true}) {
    const Route r = route(logits, k, norm);
    for (int64_t t = 0; t < n; ++t) {
      Doubles p(static_cast<size_t>(e));
      double m = -INFINITY, sum = 0.0;
      for (int64_t j = 0; j < e; ++j) m = std::max(m, logits.item_as_double(t * e + j));
      for (int64_t j = 0; j < e; ++j)
        sum += (p[static_cast<size_t>(j)] = std::exp(logits.item_as_double(t * e + j) - m));
      for (double& x : p) x /= sum;
      for (int64_t j = 0; j < e; ++j) ASSERT_NEAR(r.probs.data<float>()[t * e + j], p[static_cast<size_t>(j)], 1e-7);
      std::vector<int32_t> order(static_cast<size_t>(e));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
      double chosen = 0.0;
      for (int64_t j = 0; j < k; ++j) chosen += p[static_cast<size_t>(order[static_cast<size_t>(j)])];
      for (int64_t j = 0; j < k; ++j) {
        const int32_t want = order[static_cast<size_t>(j)];
        ASSERT_EQ(r.idx.data<int32_t>()[t * k + j], want) << "token " << t << " slot " << j;
        const double w = p[static_cast<size_t>(want)] / (norm ? chosen : 1.0);
        ASSERT_NEAR(r.weight.data<float>()[t * k + j], w, 1e-6 * w);
      }
    }
  }
}

TEST(OpsMoe, RouteBreaksTiesTowardsTheLowerExpert) {
  const Tensor logits = Tensor::from_vector<float>({1, 2, 2, 0, 2, /**/ 5, 5, 5, 5, 5}, {2, 5});
  const Route r = route(logits, 3, true);
  EXPECT_EQ(std::vector<int32_t>(r.idx.data<int32_t>(), r.idx.data<int32_t>() + 6),
            (std::vector<int32_t>{1, 2, 4, 0, 1, 2}));
  for (int64_t j = 0; j < 6; ++j) EXPECT_NEAR(r.weight.data<float>()[j], 1.0 / 3.0, 1e-7);
}

TEST(OpsMoe, RouteBackwardMatchesFiniteDifferences) {
  std::mt19937 rng(72);
  const int64_t n = 4, e = 6, k = 2;
  for (bool norm : {false, true}) {
    for (bool with_extra : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "norm " << norm << " extra " << with_extra);
      Tensor logits = random_f32({n, e}, rng, -2.0f, 2.0f);
      const Tensor dweight = random_f32({n, k}, rng);
      const Tensor dprobs = random_f32({n, e}, rng);
      const Route r = route(logits, k, norm);
      // The loss <dweight, topk_weight> (+ <dprobs, probs>), with the selection held fixed as in training.
      auto loss = [&] {
        const Route p = route(logits, k, norm);
        for (int64_t i = 0; i < n * k; ++i)
          if (p.idx.data<int32_t>()[i] != r.idx.data<int32_t>()[i]) ADD_FAILURE() << "selection moved";
        return project(p.weight, dweight) + (with_extra ? project(p.probs, dprobs) : 0.0);
      };
      Tensor dlogits = Tensor::empty({n, e}, DType::F32), none;
      ops::moe_route_backward(dweight, with_extra ? dprobs : none, r.probs, r.idx, norm, dlogits);
      expect_gradient("dlogits", logits, dlogits, loss, 1e-3f);
    }
  }
}

TEST(OpsMoe, PermuteIsAStableSortByExpert) {
  const int64_t n = 5, k = 2, h = 3, e = 4;
  // (token, slot) -> expert; expert 3 gets nothing.
  const Tensor idx = Tensor::from_vector<int32_t>({2, 0, 0, 1, 2, 0, 1, 2, 0, 1}, {n, k});
  std::mt19937 rng(73);
  const Tensor x = random_f32({n, h}, rng);
  Tensor permuted = Tensor::empty({n * k, h}, DType::F32), row_map = Tensor::empty({n * k}, DType::I32);
  std::vector<int64_t> counts;
  ops::moe_permute(x, idx, e, permuted, row_map, counts);
  EXPECT_EQ(counts, (std::vector<int64_t>{4, 3, 3, 0}));
  // Expert 0: (0,1) (1,0) (2,1) (4,0); expert 1: (1,1) (3,0) (4,1); expert 2: (0,0) (2,0) (3,1).
  EXPECT_EQ(std::vector<int32_t>(row_map.data<int32_t>(), row_map.data<int32_t>() + n * k),
            (std::vector<int32_t>{7, 0, 1, 4, 8, 2, 5, 9, 3, 6}));
  for (int64_t i = 0; i < n * k; ++i)
    for (int64_t c = 0; c < h; ++c)
      ASSERT_EQ(permuted.data<float>()[row_map.data<int32_t>()[i] * h + c], x.data<float>()[(i / k) * h + c]);
}

TEST(OpsMoe, PermuteBackwardAndUnpermuteWithGradients) {
  std::mt19937 rng(74);
  const int64_t n = 7, e = 5, k = 3, h = 4;
  const Route r = route(random_f32({n, e}, rng), k, true);
  Tensor x = random_f32({n, h}, rng);
  Tensor permuted = Tensor::empty({n * k, h}, DType::F32), row_map = Tensor::empty({n * k}, DType::I32);
  std::vector<int64_t> counts;
  ops::moe_permute(x, r.idx, e, permuted, row_map, counts);
  const int32_t* map = row_map.data<int32_t>();

  // Permute backward is the adjoint of the permutation: <permute(x), g> = <x, permute_backward(g)>.
  const Tensor g = random_f32({n * k, h}, rng);
  Tensor dx = Tensor::empty({n, h}, DType::F32);
  ops::moe_permute_backward(g, row_map, k, dx);
  Doubles want_dx(static_cast<size_t>(n * h), 0.0);
  for (int64_t i = 0; i < n * k; ++i)
    for (int64_t c = 0; c < h; ++c) want_dx[static_cast<size_t>((i / k) * h + c)] += g.item_as_double(map[i] * h + c);
  EXPECT_TRUE(all_close(dx, want_dx, 1e-6, 1e-6));

  // Unpermute: out[t] = sum_j w[t,j] * y[row_map[t*k+j]].
  Tensor y = random_f32({n * k, h}, rng);
  Tensor weight = r.weight.clone();
  Tensor out = Tensor::empty({n, h}, DType::F32);
  ops::moe_unpermute(y, row_map, weight, out);
  Doubles want_out(static_cast<size_t>(n * h), 0.0);
  for (int64_t i = 0; i < n * k; ++i)
    for (int64_t c = 0; c < h; ++c)
      want_out[static_cast<size_t>((i / k) * h + c)] += weight.item_as_double(i) * y.item_as_double(map[i] * h + c);
  EXPECT_TRUE(all_close(out, want_out, 1e-6, 1e-6));

  const Tensor proj = random_f32({n, h}, rng);
  auto loss = [&] {
    Tensor o = Tensor::empty({n, h}, DType::F32);
    ops::moe_unpermute(y, row_map, weight, o);
    return project(o, proj);
  };
  Tensor dy = Tensor::full<float>({n * k, h}, NAN), dweight = Tensor::empty({n, k}, DType::F32);
  ops::moe_unpermute_backward(proj, y, row_map, weight, dy, dweight);
  expect_gradient("dy", y, dy, loss);
  expect_gradient("dtopk_weight", weight, dweight, loss);
}

// The load-balancing statistics of the first `rows` tokens: slot counts per expert and bias_grad's column sums.
TEST(OpsMoe, RouterStatsCountSlotsAndSumProbabilitiesOfRealRows) {
  std::mt19937 rng(73);
  const int64_t n = 13, e = 6, k = 2, rows = 10;
  const Route r = route(random_f32({n, e}, rng, -2.0f, 2.0f), k, true);
  Tensor stats = Tensor::full<float>({2, e}, 7.0f);  // overwritten
  ops::moe_router_stats(r.probs, r.idx, rows, stats);
  std::vector<float> counts(static_cast<size_t>(e), 0.0f);
  for (int64_t i = 0; i < rows * k; ++i) counts[static_cast<size_t>(r.idx.data<int32_t>()[i])] += 1.0f;
  Tensor sums = Tensor::zeros({e}, DType::F32);
  ops::bias_grad(r.probs.slice(0, rows), sums);
  const std::vector<float> got = stats.to_float_vector();
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + e), counts);
  EXPECT_EQ(std::vector<float>(got.begin() + e, got.end()), sums.to_float_vector());  // bit for bit
  ops::moe_router_stats(r.probs, r.idx, 0, stats);
  EXPECT_EQ(stats.to_float_vector(), std::vector<float>(static_cast<size_t>(2 * e), 0.0f));
  Tensor wrong = Tensor::zeros({e}, DType::F32);
  EXPECT_THROW(ops::moe_router_stats(r.probs, r.idx, rows, wrong), Error);
  EXPECT_THROW(ops::moe_router_stats(r.probs, r.idx, n + 1, stats), Error);
}

TEST(OpsMoe, AuxDprobsSpreadTheGradientOverRealRows) {
  const Tensor dprob = Tensor::from_vector<float>({0.5f, -1.0f, 2.0f}, {3});
  Tensor dprobs = Tensor::full<float>({4, 3}, 9.0f);
  ops::moe_aux_dprobs(dprob, 2, dprobs);
  EXPECT_EQ(dprobs.to_float_vector(),
            (std::vector<float>{0.5f, -1.0f, 2.0f, 0.5f, -1.0f, 2.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}));
  Tensor short_row = Tensor::zeros({2}, DType::F32);
  EXPECT_THROW(ops::moe_aux_dprobs(short_row, 2, dprobs), Error);
  EXPECT_THROW(ops::moe_aux_dprobs(dprob, 5, dprobs), Error);
}

TEST(OpsMoe, RejectsBadArguments) {
  const Tensor logits = Tensor::zeros({3, 4}, DType::F32);
  Tensor probs = Tensor::zeros({3, 4}, DType::F32), idx = Tensor::zeros({3, 5}, DType::I32);
  Tensor w = Tensor::zeros({3, 5}, DType::F32);
  EXPECT_THROW(ops::moe_route(logits, 5, true, probs, idx, w), Error);  // k > experts
  Tensor idx2 = Tensor::zeros({3, 2}, DType::I32), w2 = Tensor::zeros({3, 2}, DType::F32);
  Tensor idx_i64 = Tensor::zeros({3, 2}, DType::I64);
  EXPECT_THROW(ops::moe_route(logits, 2, true, probs, idx_i64, w2), Error);
  EXPECT_NO_THROW(ops::moe_route(logits, 2, true, probs, idx2, w2));

  const Tensor x = Tensor::zeros({3, 2}, DType::F32);
  Tensor permuted = Tensor::zeros({6, 2}, DType::F32), row_map = Tensor::zeros({6}, DType::I32);
  std::vector<int64_t> counts;
  const Tensor bad_idx = Tensor::from_vector<int32_t>({0, 1, 4, 0, 1, 2}, {3, 2});
  EXPECT_THROW(ops::moe_permute(x, bad_idx, 4, permuted, row_map, counts), Error);  // expert 4 of 4
  Tensor short_perm = Tensor::zeros({5, 2}, DType::F32);
  EXPECT_THROW(ops::moe_permute(x, idx2, 4, short_perm, row_map, counts), Error);
  Tensor dlogits = Tensor::zeros({3, 4}, DType::F32), none;
  EXPECT_THROW(ops::moe_route_backward(w2, none, probs, bad_idx, true, dlogits), Error);

  // A row_map that is not a permutation (row 0 twice) is refused by everything that reads one.
  const Tensor dup_map = Tensor::from_vector<int32_t>({0, 0, 1, 2, 3, 4}, {6});
  Tensor out = Tensor::zeros({3, 2}, DType::F32), dy = Tensor::zeros({6, 2}, DType::F32);
  EXPECT_THROW(ops::moe_permute_backward(permuted, dup_map, 2, out), Error);
  EXPECT_THROW(ops::moe_unpermute(permuted, dup_map, w2, out), Error);
  Tensor dw = Tensor::zeros({3, 2}, DType::F32);
  EXPECT_THROW(ops::moe_unpermute_backward(out, permuted, dup_map, w2, dy, dw), Error);
  EXPECT_THROW(ops::moe_permute_backward(permuted, row_map, 3, out), Error);  // 3 * 3 rows != 6
}
