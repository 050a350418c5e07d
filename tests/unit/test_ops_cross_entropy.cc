// Tests of the fused cross-entropy: loss and gradient against double precision, ignore_index, in-place gradients,
// stability with large logits, label checks and thread-count determinism.
#include <cmath>
#include <limits>

#include "kernels/ops.h"
#include "test_ops_util.h"

using namespace veomni;
using namespace veomni::test_ops;

namespace {

// losses and dlogits = scale * (softmax - onehot) in double; ignored rows give 0.
void naive_ce(const Tensor& logits, const std::vector<int64_t>& labels, double scale, Doubles& losses, Doubles& grad) {
  const int64_t n = logits.dim(0), v = logits.dim(1);
  const Doubles x = to_doubles(logits);
  losses.assign(static_cast<size_t>(n), 0.0);
  grad.assign(x.size(), 0.0);
  for (int64_t r = 0; r < n; ++r) {
    if (labels[static_cast<size_t>(r)] == kIgnore) continue;
    const double* xr = x.data() + r * v;
    double m = xr[0];
    for (int64_t j = 1; j < v; ++j) m = std::max(m, xr[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(xr[j] - m);
    const int64_t y = labels[static_cast<size_t>(r)];
    losses[static_cast<size_t>(r)] = std::log(sum) + m - xr[y];
    for (int64_t j = 0; j < v; ++j)
      grad[static_cast<size_t>(r * v + j)] = scale * (std::exp(xr[j] - m) / sum - (j == y ? 1.0 : 0.0));
  }
}

}  // namespace

TEST(OpsCrossEntropy, LossAndGradientMatchReference) {
  std::mt19937 rng(51);
  for (const auto& [n, v] : {std::pair<int64_t, int64_t>{1, 1}, {7, 3}, {33, 1000}, {4, 5003}}) {
    SCOPED_TRACE(::testing::Message() << "N " << n << " V " << v);
    const Tensor logits = random_f32({n, v}, rng, -6.0f, 6.0f);
    std::vector<int64_t> labels = random_labels(n, v, rng);
    if (n > 2) labels[1] = labels[n - 1] = kIgnore;
    Tensor losses = Tensor::empty({n}, DType::F32), dlogits = Tensor::empty({n, v}, DType::F32);
    ops::cross_entropy(logits, Tensor::from_vector(labels, {n}), kIgnore, 0.125f, losses, dlogits);
    Doubles want_loss, want_grad;
    naive_ce(logits, labels, 0.125, want_loss, want_grad);
    EXPECT_TRUE(all_close(losses, want_loss, 1e-6, 1e-7));
    EXPECT_TRUE(all_close(dlogits, want_grad, 1e-6, 1e-9));
    if (n > 2) {
      EXPECT_EQ(losses.data<float>()[1], 0.0f);
      for (int64_t j = 0; j < v; ++j) ASSERT_EQ(dlogits.data<float>()[v + j], 0.0f);
    }
  }
}

TEST(OpsCrossEntropy, InPlaceGradientAndLossOnly) {
  std::mt19937 rng(52);
  const Tensor logits = random_f32({9, 77}, rng, -3.0f, 3.0f);
  const Tensor labels = Tensor::from_vector(random_labels(9, 77, rng), {9});
  Tensor losses = Tensor::empty({9}, DType::F32), grad = Tensor::empty({9, 77}, DType::F32);
  ops::cross_entropy(logits, labels, kIgnore, 1.0f, losses, grad);
  Tensor in_place = logits.clone(), losses2 = Tensor::empty({9}, DType::F32), none;
  ops::cross_entropy(in_place, labels, kIgnore, 1.0f, losses2, in_place);
  EXPECT_TRUE(bitwise_equal(in_place, grad));
  EXPECT_TRUE(bitwise_equal(losses, losses2));
  Tensor losses3 = Tensor::empty({9}, DType::F32);
  ops::cross_entropy(logits, labels, kIgnore, 1.0f, losses3, none);
  EXPECT_TRUE(bitwise_equal(losses, losses3));
}

TEST(OpsCrossEntropy, LargeLogitsAreStable) {
  // exp(1e4) overflows any float: the max must be subtracted first.
  const Tensor logits = Tensor::from_vector<float>({1e4f, 1e4f - 1.0f, -1e4f, 3e4f, 3e4f, 3e4f}, {2, 3});
  const Tensor labels = Tensor::from_vector<int64_t>({1, 2}, {2});
  Tensor losses = Tensor::empty({2}, DType::F32), grad = Tensor::empty({2, 3}, DType::F32);
  ops::cross_entropy(logits, labels, kIgnore, 1.0f, losses, grad);
  const double l0 = std::log(1.0 + std::exp(-1.0) + std::exp(-2e4)) + 1.0;
  EXPECT_NEAR(losses.data<float>()[0], l0, 1e-6);
  EXPECT_NEAR(losses.data<float>()[1], std::log(3.0), 1e-6);
  EXPECT_NEAR(grad.data<float>()[5], 1.0 / 3.0 - 1.0, 1e-7);
  for (float g : grad.to_float_vector()) EXPECT_TRUE(std::isfinite(g));
}

TEST(OpsCrossEntropy, GradientMatchesFiniteDifferences) {
  std::mt19937 rng(53);
  Tensor logits = random_f32({3, 11}, rng, -2.0f, 2.0f);
  const Tensor labels = Tensor::from_vector<int64_t>({4, kIgnore, 10}, {3});
  auto loss = [&] {
    Tensor losses = Tensor::empty({3}, DType::F32), none;
    ops::cross_entropy(logits, labels, kIgnore, 1.0f, losses, none);
    return 0.5 * (losses.item_as_double(0) + losses.item_as_double(1) + losses.item_as_double(2));
  };
  Tensor losses = Tensor::empty({3}, DType::F32), grad = Tensor::empty({3, 11}, DType::F32);
  ops::cross_entropy(logits, labels, kIgnore, 0.5f, losses, grad);  // grad_scale 0.5 = d(0.5 * sum)/dloss
  expect_gradient("dlogits", logits, grad, loss, 1e-3f);
}

TEST(OpsCrossEntropy, BitwiseIndependentOfThreadCount) {
  std::mt19937 rng(54);
  const Tensor logits = random_f32({64, 3001}, rng, -5.0f, 5.0f);
  const Tensor labels = Tensor::from_vector(random_labels(64, 3001, rng), {64});
  Tensor l1 = Tensor::empty({64}, DType::F32), l2 = l1.clone(), g1 = logits.clone(), g2 = logits.clone();
  with_threads(1, [&] { ops::cross_entropy(logits, labels, kIgnore, 0.01f, l1, g1); });
  with_threads(2, [&] { ops::cross_entropy(logits, labels, kIgnore, 0.01f, l2, g2); });
  EXPECT_TRUE(bitwise_equal(l1, l2));
  EXPECT_TRUE(bitwise_equal(g1, g2));
}

TEST(OpsCrossEntropy, RejectsBadLabelsAndShapes) {
  Tensor logits = Tensor::zeros({2, 5}, DType::F32), losses = Tensor::zeros({2}, DType::F32), none;
  Tensor grad = Tensor::zeros({2, 5}, DType::F32);
  EXPECT_THROW(ops::cross_entropy(logits, Tensor::from_vector<int64_t>({1, 5}, {2}), kIgnore, 1.0f, losses, none),
               InputError);
  EXPECT_THROW(ops::cross_entropy(logits, Tensor::from_vector<int64_t>({-1, 0}, {2}), kIgnore, 1.0f, losses, none),
               InputError);
  // A bad label is caught before anything is written, also in place.
  EXPECT_THROW(ops::cross_entropy(logits, Tensor::from_vector<int64_t>({0, 9}, {2}), kIgnore, 1.0f, losses, logits),
               InputError);
  EXPECT_EQ(logits.to_float_vector(), std::vector<float>(10, 0.0f));
  EXPECT_THROW(ops::cross_entropy(logits, Tensor::from_vector<int32_t>({0, 1}, {2}), kIgnore, 1.0f, losses, none),
               Error);
  EXPECT_THROW(ops::cross_entropy(logits, Tensor::from_vector<int64_t>({0, 1, 2}, {3}), kIgnore, 1.0f, losses, none),
               Error);
  Tensor narrow = Tensor::zeros({2, 4}, DType::F32);
  EXPECT_THROW(ops::cross_entropy(logits, Tensor::from_vector<int64_t>({0, 1}, {2}), kIgnore, 1.0f, losses, narrow),
               Error);
  Tensor big = Tensor::zeros({3, 5}, DType::F32);
  Tensor shifted = big.view({15}).slice(2, 12).view({2, 5});  // overlaps rows of `big` at another offset
  EXPECT_THROW(
      ops::cross_entropy(big.slice(0, 2), Tensor::from_vector<int64_t>({0, 1}, {2}), kIgnore, 1.0f, losses, shifted),
      Error);
  EXPECT_NO_THROW(
      ops::cross_entropy(logits, Tensor::from_vector<int64_t>({kIgnore, 4}, {2}), kIgnore, 1.0f, losses, grad));
}
