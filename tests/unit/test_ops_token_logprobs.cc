// Tests of the label log-prob and entropy op pair: against double precision and finite differences, against the
// fused cross-entropy (log-prob = -loss, gradient at dlogprobs = -1 = CE's), ignore_index, in place, large logits,
// label checks and thread-count determinism.
#include <cmath>
#include <limits>

#include "kernels/ops.h"
#include "test_ops_util.h"

using namespace veomni;
using namespace veomni::test_ops;

namespace {

struct NaiveRow {
  double log_prob = 0.0, entropy = 0.0;
  Doubles p;
};

// Softmax, label log-prob and entropy of one row in double, from the textbook formulas.
NaiveRow naive_row(const double* x, int64_t v, int64_t label) {
  double m = x[0];
  for (int64_t j = 1; j < v; ++j) m = std::max(m, x[j]);
  double sum = 0.0;
  for (int64_t j = 0; j < v; ++j) sum += std::exp(x[j] - m);
  NaiveRow row;
  row.p.resize(static_cast<size_t>(v));
  for (int64_t j = 0; j < v; ++j) {
    const double p = std::exp(x[j] - m) / sum;
    row.p[static_cast<size_t>(j)] = p;
    if (p > 0.0) row.entropy -= p * std::log(p);
  }
  row.log_prob = x[label] - m - std::log(sum);
  return row;
}

Tensor f32_vector(int64_t n) { return Tensor::empty({n}, DType::F32); }

}  // namespace

TEST(OpsTokenLogprobs, ForwardAndBackwardMatchDoubleReference) {
  std::mt19937 rng(61);
  for (const auto& [n, v] : {std::pair<int64_t, int64_t>{1, 1}, {7, 3}, {33, 1000}, {4, 5003}}) {
    SCOPED_TRACE(::testing::Message() << "N " << n << " V " << v);
    const Tensor logits = random_f32({n, v}, rng, -6.0f, 6.0f);
    std::vector<int64_t> labels = random_labels(n, v, rng);
    if (n > 2) labels[1] = labels[n - 1] = kIgnore;
    const Tensor dlp = random_f32({n}, rng), dent = random_f32({n}, rng);
    Tensor logprobs = f32_vector(n), entropy = f32_vector(n), dlogits = Tensor::empty({n, v}, DType::F32);
    const Tensor y = Tensor::from_vector(labels, {n});
    ops::token_logprobs(logits, y, kIgnore, logprobs, entropy);
    ops::token_logprobs_backward(logits, y, kIgnore, dlp, dent, dlogits);

    const Doubles x = to_doubles(logits);
    Doubles want_lp(static_cast<size_t>(n), 0.0), want_ent(static_cast<size_t>(n), 0.0), want_grad(x.size(), 0.0);
    for (int64_t r = 0; r < n; ++r) {
      if (labels[static_cast<size_t>(r)] == kIgnore) continue;
      const NaiveRow row = naive_row(x.data() + r * v, v, labels[static_cast<size_t>(r)]);
      want_lp[static_cast<size_t>(r)] = row.log_prob;
      want_ent[static_cast<size_t>(r)] = row.entropy;
      for (int64_t j = 0; j < v; ++j) {
        const double p = row.p[static_cast<size_t>(j)];
        const double onehot = j == labels[static_cast<size_t>(r)] ? 1.0 : 0.0;
        want_grad[static_cast<size_t>(r * v + j)] =
            dlp.item_as_double(r) * (onehot - p) + dent.item_as_double(r) * (-p * (std::log(p) + row.entropy));
      }
    }
    EXPECT_TRUE(all_close(logprobs, want_lp, 1e-6, 1e-7));
    EXPECT_TRUE(all_close(entropy, want_ent, 1e-6, 1e-7));
    EXPECT_TRUE(all_close(dlogits, want_grad, 1e-6, 1e-9));
    if (n > 2) {
      EXPECT_EQ(logprobs.data<float>()[1], 0.0f);
      EXPECT_EQ(entropy.data<float>()[1], 0.0f);
      for (int64_t j = 0; j < v; ++j) ASSERT_EQ(dlogits.data<float>()[v + j], 0.0f);
    }
  }
}

TEST(OpsTokenLogprobs, LogProbIsMinusCrossEntropyAndGradientsAgree) {
  std::mt19937 rng(62);
  const int64_t n = 19, v = 517;
  const Tensor logits = random_f32({n, v}, rng, -8.0f, 8.0f);
  std::vector<int64_t> labels = random_labels(n, v, rng);
  labels[3] = kIgnore;
  const Tensor y = Tensor::from_vector(labels, {n});
  Tensor losses = f32_vector(n), ce_grad = Tensor::empty({n, v}, DType::F32);
  ops::cross_entropy(logits, y, kIgnore, 1.0f, losses, ce_grad);
  Tensor logprobs = f32_vector(n), none;
  ops::token_logprobs(logits, y, kIgnore, logprobs, none);
  for (int64_t r = 0; r < n; ++r) EXPECT_EQ(logprobs.data<float>()[r], -losses.data<float>()[r]) << "row " << r;
  // d(-sum logprobs) = d(sum losses): the same gradient bit for bit.
  Tensor grad = Tensor::empty({n, v}, DType::F32);
  ops::token_logprobs_backward(logits, y, kIgnore, Tensor::full<float>({n}, -1.0f), none, grad);
  EXPECT_TRUE(bitwise_equal(grad, ce_grad));
}

TEST(OpsTokenLogprobs, GradientMatchesFiniteDifferences) {
  std::mt19937 rng(63);
  Tensor logits = random_f32({3, 11}, rng, -2.0f, 2.0f);
  const Tensor labels = Tensor::from_vector<int64_t>({4, kIgnore, 10}, {3});
  const Tensor dlp = Tensor::from_vector<float>({0.7f, -1.3f, -0.4f}, {3});
  const Tensor dent = Tensor::from_vector<float>({-0.9f, 0.5f, 1.6f}, {3});
  auto loss = [&] {
    Tensor lp = f32_vector(3), ent = f32_vector(3);
    ops::token_logprobs(logits, labels, kIgnore, lp, ent);
    return project(lp, dlp) + project(ent, dent);
  };
  Tensor grad = Tensor::empty({3, 11}, DType::F32);
  ops::token_logprobs_backward(logits, labels, kIgnore, dlp, dent, grad);
  expect_gradient("dlogits", logits, grad, loss, 1e-3f);
}

TEST(OpsTokenLogprobs, InPlaceAndWithoutEntropy) {
  std::mt19937 rng(64);
  const Tensor logits = random_f32({9, 77}, rng, -3.0f, 3.0f);
  const Tensor labels = Tensor::from_vector(random_labels(9, 77, rng), {9});
  const Tensor dlp = random_f32({9}, rng), dent = random_f32({9}, rng);
  Tensor grad = Tensor::empty({9, 77}, DType::F32);
  ops::token_logprobs_backward(logits, labels, kIgnore, dlp, dent, grad);
  Tensor in_place = logits.clone();
  ops::token_logprobs_backward(in_place, labels, kIgnore, dlp, dent, in_place);
  EXPECT_TRUE(bitwise_equal(in_place, grad));
  // Without entropy: the forward's log-probs are unchanged and a zero dentropy equals no dentropy.
  Tensor lp1 = f32_vector(9), ent = f32_vector(9), lp2 = f32_vector(9), none;
  ops::token_logprobs(logits, labels, kIgnore, lp1, ent);
  ops::token_logprobs(logits, labels, kIgnore, lp2, none);
  EXPECT_TRUE(bitwise_equal(lp1, lp2));
  Tensor g_none = Tensor::empty({9, 77}, DType::F32), g_zero = Tensor::empty({9, 77}, DType::F32);
  ops::token_logprobs_backward(logits, labels, kIgnore, dlp, none, g_none);
  ops::token_logprobs_backward(logits, labels, kIgnore, dlp, Tensor::zeros({9}, DType::F32), g_zero);
  EXPECT_TRUE(bitwise_equal(g_none, g_zero));
}

TEST(OpsTokenLogprobs, LargeAndInfiniteLogitsAreStable) {
  // exp(1e4) overflows any float: the max must be subtracted first. A -inf logit has p = 0 and adds nothing.
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor logits = Tensor::from_vector<float>({1e4f, 1e4f - 1.0f, -1e4f, 3e4f, 3e4f, -inf}, {2, 3});
  const Tensor labels = Tensor::from_vector<int64_t>({1, 0}, {2});
  Tensor lp = f32_vector(2), ent = f32_vector(2), grad = Tensor::empty({2, 3}, DType::F32);
  ops::token_logprobs(logits, labels, kIgnore, lp, ent);
  const double z = 1.0 + std::exp(-1.0);
  EXPECT_NEAR(lp.data<float>()[0], -1.0 - std::log(z), 1e-6);
  EXPECT_NEAR(ent.data<float>()[0], std::log(z) + std::exp(-1.0) / z, 1e-6);
  EXPECT_NEAR(lp.data<float>()[1], -std::log(2.0), 1e-6);
  EXPECT_NEAR(ent.data<float>()[1], std::log(2.0), 1e-6);
  ops::token_logprobs_backward(logits, labels, kIgnore, Tensor::full<float>({2}, 1.0f), Tensor::full<float>({2}, 1.0f),
                               grad);
  for (float g : grad.to_float_vector()) EXPECT_TRUE(std::isfinite(g));
  EXPECT_EQ(grad.data<float>()[5], 0.0f);
  // Two equal classes: the entropy is at its maximum, its gradient vanishes; the log-prob's is 1 - p.
  EXPECT_NEAR(grad.data<float>()[3], 0.5, 1e-6);
  EXPECT_NEAR(grad.data<float>()[4], -0.5, 1e-6);
}

TEST(OpsTokenLogprobs, BitwiseIndependentOfThreadCount) {
  std::mt19937 rng(65);
  const Tensor logits = random_f32({64, 3001}, rng, -5.0f, 5.0f);
  const Tensor labels = Tensor::from_vector(random_labels(64, 3001, rng), {64});
  const Tensor dlp = random_f32({64}, rng), dent = random_f32({64}, rng);
  Tensor l1 = f32_vector(64), l2 = f32_vector(64), e1 = f32_vector(64), e2 = f32_vector(64);
  Tensor g1 = logits.clone(), g2 = logits.clone();
  with_threads(1, [&] {
    ops::token_logprobs(logits, labels, kIgnore, l1, e1);
    ops::token_logprobs_backward(logits, labels, kIgnore, dlp, dent, g1);
  });
  with_threads(2, [&] {
    ops::token_logprobs(logits, labels, kIgnore, l2, e2);
    ops::token_logprobs_backward(logits, labels, kIgnore, dlp, dent, g2);
  });
  EXPECT_TRUE(bitwise_equal(l1, l2));
  EXPECT_TRUE(bitwise_equal(e1, e2));
  EXPECT_TRUE(bitwise_equal(g1, g2));
}

TEST(OpsTokenLogprobs, RejectsBadLabelsAndShapes) {
  Tensor logits = Tensor::zeros({2, 5}, DType::F32), lp = Tensor::zeros({2}, DType::F32), none;
  const Tensor dlp = Tensor::zeros({2}, DType::F32);
  EXPECT_THROW(ops::token_logprobs(logits, Tensor::from_vector<int64_t>({1, 5}, {2}), kIgnore, lp, none), InputError);
  EXPECT_THROW(ops::token_logprobs(logits, Tensor::from_vector<int64_t>({-1, 0}, {2}), kIgnore, lp, none), InputError);
  // A bad label is caught before anything is written, also in place.
  EXPECT_THROW(
      ops::token_logprobs_backward(logits, Tensor::from_vector<int64_t>({0, 9}, {2}), kIgnore, dlp, none, logits),
      InputError);
  EXPECT_EQ(logits.to_float_vector(), std::vector<float>(10, 0.0f));
  const Tensor good = Tensor::from_vector<int64_t>({0, 1}, {2});
  EXPECT_THROW(ops::token_logprobs(logits, Tensor::from_vector<int32_t>({0, 1}, {2}), kIgnore, lp, none), Error);
  Tensor short_lp = Tensor::zeros({3}, DType::F32);
  EXPECT_THROW(ops::token_logprobs(logits, good, kIgnore, short_lp, none), Error);
  Tensor narrow = Tensor::zeros({2, 4}, DType::F32);
  EXPECT_THROW(ops::token_logprobs_backward(logits, good, kIgnore, dlp, none, narrow), Error);
  Tensor wrong_dent = Tensor::zeros({3}, DType::F32);
  EXPECT_THROW(ops::token_logprobs_backward(logits, good, kIgnore, dlp, wrong_dent, logits), Error);
  Tensor big = Tensor::zeros({3, 5}, DType::F32);
  Tensor shifted = big.view({15}).slice(2, 12).view({2, 5});  // overlaps rows of `big` at another offset
  EXPECT_THROW(ops::token_logprobs_backward(big.slice(0, 2), good, kIgnore, dlp, none, shifted), Error);
  Tensor grad = Tensor::zeros({2, 5}, DType::F32);
  EXPECT_NO_THROW(
      ops::token_logprobs_backward(logits, Tensor::from_vector<int64_t>({kIgnore, 4}, {2}), kIgnore, dlp, none, grad));
}
