// Tests of rmsnorm forward/backward against a double-precision reference and finite differences.
#include <cmath>

#include "kernels/ops.h"
#include "test_ops_util.h"

using namespace veomni;
using namespace veomni::test_ops;

namespace {

struct NormReference {
  Doubles y, rstd, dx, dweight;
};

// y = w * x / sqrt(mean(x^2) + eps); dx, dweight for upstream dy, all in double.
NormReference naive_rmsnorm(const Tensor& x, const Tensor& w, double eps, const Tensor& dy) {
  const int64_t n = x.dim(0), d = x.dim(1);
  const Doubles xd = to_doubles(x), wd = to_doubles(w), dyd = to_doubles(dy);
  NormReference ref{Doubles(xd.size()), Doubles(static_cast<size_t>(n)), Doubles(xd.size()),
                    Doubles(static_cast<size_t>(d), 0.0)};
  for (int64_t r = 0; r < n; ++r) {
    const double* xr = xd.data() + r * d;
    const double* gr = dyd.data() + r * d;
    double ms = 0.0;
    for (int64_t i = 0; i < d; ++i) ms += xr[i] * xr[i];
    const double rs = 1.0 / std::sqrt(ms / static_cast<double>(d) + eps);
    ref.rstd[static_cast<size_t>(r)] = rs;
    double dot = 0.0;
    for (int64_t i = 0; i < d; ++i) dot += wd[static_cast<size_t>(i)] * gr[i] * xr[i];
    for (int64_t i = 0; i < d; ++i) {
      const size_t k = static_cast<size_t>(r * d + i);
      ref.y[k] = wd[static_cast<size_t>(i)] * xr[i] * rs;
      ref.dx[k] = rs * wd[static_cast<size_t>(i)] * gr[i] - rs * rs * rs * xr[i] * dot / static_cast<double>(d);
      ref.dweight[static_cast<size_t>(i)] += gr[i] * xr[i] * rs;
    }
  }
  return ref;
}

}  // namespace

TEST(OpsNorm, RmsnormMatchesReference) {
  std::mt19937 rng(11);
  const int64_t shapes[][2] = {{1, 1}, {5, 7}, {33, 131}, {2, 1024}};
  for (const auto& s : shapes) {
    SCOPED_TRACE(::testing::Message() << "N " << s[0] << " D " << s[1]);
    const Tensor x = random_f32({s[0], s[1]}, rng, -2.0f, 2.0f);
    const Tensor w = random_f32({s[1]}, rng, 0.5f, 1.5f);
    const Tensor dy = random_f32({s[0], s[1]}, rng);
    const NormReference ref = naive_rmsnorm(x, w, 1e-6, dy);
    Tensor y = Tensor::empty(x.shape(), DType::F32), rstd = Tensor::empty({s[0]}, DType::F32);
    ops::rmsnorm_forward(x, w, 1e-6f, y, rstd);
    EXPECT_TRUE(all_close(y, ref.y, 1e-5, 1e-6));
    EXPECT_TRUE(all_close(rstd, ref.rstd, 1e-6, 0.0));
    Tensor dx = Tensor::empty(x.shape(), DType::F32);
    Tensor dw = Tensor::full<float>({s[1]}, 0.25f);  // accumulates
    ops::rmsnorm_backward(dy, x, w, rstd, dx, dw);
    // dx subtracts two terms of size rstd*|w*dy| (they cancel exactly when D = 1): compare at that scale.
    const double term = max_abs(ref.rstd) * max_abs(to_doubles(w)) * max_abs(to_doubles(dy));
    EXPECT_TRUE(all_close(dx, ref.dx, 1e-5, 1e-6 * term));
    Doubles dw_want = ref.dweight;
    for (double& v : dw_want) v += 0.25;
    EXPECT_TRUE(all_close(dw, dw_want, 1e-5, 1e-5 * max_abs(dw_want)));
  }
}

TEST(OpsNorm, RmsnormBackwardMatchesFiniteDifferences) {
  std::mt19937 rng(12);
  Tensor x = random_f32({4, 9}, rng, -2.0f, 2.0f);
  Tensor w = random_f32({9}, rng, 0.5f, 1.5f);
  const Tensor proj = random_f32({4, 9}, rng);
  auto loss = [&] {
    Tensor y = Tensor::empty({4, 9}, DType::F32), rstd = Tensor::empty({4}, DType::F32);
    ops::rmsnorm_forward(x, w, 1e-5f, y, rstd);
    return project(y, proj);
  };
  Tensor y = Tensor::empty({4, 9}, DType::F32), rstd = Tensor::empty({4}, DType::F32);
  ops::rmsnorm_forward(x, w, 1e-5f, y, rstd);
  Tensor dx = Tensor::empty({4, 9}, DType::F32), dw = Tensor::zeros({9}, DType::F32);
  ops::rmsnorm_backward(proj, x, w, rstd, dx, dw);
  expect_gradient("dx", x, dx, loss);
  expect_gradient("dweight", w, dw, loss);
}

// A frozen weight (dweight undefined): the same dx, bit for bit, and no weight gradient anywhere.
TEST(OpsNorm, RmsnormBackwardWithoutWeightGradGivesTheSameDx) {
  std::mt19937 rng(13);
  for (const auto& [n, d] : {std::pair<int64_t, int64_t>{5, 7}, {33, 131}, {3, 1024}}) {
    SCOPED_TRACE(::testing::Message() << "N " << n << " D " << d);
    const Tensor x = random_f32({n, d}, rng, -2.0f, 2.0f), w = random_f32({d}, rng, 0.5f, 1.5f);
    const Tensor dy = random_f32({n, d}, rng);
    Tensor y = Tensor::empty({n, d}, DType::F32), rstd = Tensor::empty({n}, DType::F32);
    ops::rmsnorm_forward(x, w, 1e-6f, y, rstd);
    Tensor dx_with = Tensor::empty({n, d}, DType::F32), dw = Tensor::zeros({d}, DType::F32);
    ops::rmsnorm_backward(dy, x, w, rstd, dx_with, dw);
    Tensor dx_without = Tensor::full<float>({n, d}, 7.0f), no_weight_grad;
    ops::rmsnorm_backward(dy, x, w, rstd, dx_without, no_weight_grad);
    EXPECT_TRUE(bitwise_equal(dx_without, dx_with));
    EXPECT_FALSE(no_weight_grad.defined());
  }
}

// A residual is added to dx in the same pass: the bits of dx followed by add_, with and without a weight gradient.
TEST(OpsNorm, RmsnormBackwardAddsTheResidual) {
  std::mt19937 rng(14);
  for (const auto& [n, d] : {std::pair<int64_t, int64_t>{5, 7}, {33, 131}, {3, 1024}}) {
    SCOPED_TRACE(::testing::Message() << "N " << n << " D " << d);
    const Tensor x = random_f32({n, d}, rng, -2.0f, 2.0f), w = random_f32({d}, rng, 0.5f, 1.5f);
    const Tensor dy = random_f32({n, d}, rng), residual = random_f32({n, d}, rng);
    Tensor y = Tensor::empty({n, d}, DType::F32), rstd = Tensor::empty({n}, DType::F32);
    ops::rmsnorm_forward(x, w, 1e-6f, y, rstd);
    Tensor want = Tensor::empty({n, d}, DType::F32), dw_want = Tensor::zeros({d}, DType::F32);
    ops::rmsnorm_backward(dy, x, w, rstd, want, dw_want);
    ops::add_(want, residual);
    Tensor dx = Tensor::empty({n, d}, DType::F32), dw = Tensor::zeros({d}, DType::F32), frozen;
    ops::rmsnorm_backward(dy, x, w, rstd, dx, dw, residual);
    EXPECT_TRUE(bitwise_equal(dx, want));
    EXPECT_TRUE(bitwise_equal(dw, dw_want));
    Tensor dx_frozen = Tensor::empty({n, d}, DType::F32);
    ops::rmsnorm_backward(dy, x, w, rstd, dx_frozen, frozen, residual);
    EXPECT_TRUE(bitwise_equal(dx_frozen, want));
  }
}

TEST(OpsNorm, RmsnormRejectsBadArguments) {
  Tensor x = Tensor::zeros({3, 4}, DType::F32), y = Tensor::zeros({3, 4}, DType::F32);
  Tensor w = Tensor::zeros({4}, DType::F32), rstd = Tensor::zeros({3}, DType::F32);
  Tensor w5 = Tensor::zeros({5}, DType::F32), rstd_i = Tensor::zeros({3}, DType::I32);
  EXPECT_THROW(ops::rmsnorm_forward(x, w5, 1e-6f, y, rstd), Error);
  EXPECT_THROW(ops::rmsnorm_forward(x, w, 1e-6f, y, rstd_i), Error);
  EXPECT_THROW(ops::rmsnorm_forward(x, w, 1e-6f, x, rstd), Error);  // in place is not supported
  EXPECT_THROW(ops::rmsnorm_forward(x.view({12}), w, 1e-6f, y, rstd), Error);
  Tensor dx = Tensor::zeros({3, 4}, DType::F32);
  EXPECT_THROW(ops::rmsnorm_backward(y, x, w, rstd, dx, w5), Error);
  Tensor no_weight_grad, residual_5 = Tensor::zeros({3, 5}, DType::F32);
  EXPECT_THROW(ops::rmsnorm_backward(y, x, w, rstd, dx, no_weight_grad, residual_5), Error);
  EXPECT_THROW(ops::rmsnorm_backward(y, x, w, rstd, dx, no_weight_grad, dx), Error);  // the residual is not dx
  EXPECT_NO_THROW(ops::rmsnorm_backward(y, x, w, rstd, dx, no_weight_grad, Tensor::zeros({3, 4}, DType::F32)));
  EXPECT_NO_THROW(ops::rmsnorm_forward(x, w, 1e-6f, y, rstd));
}
