// Tests of the encoder ops (LayerNorm, GELU, bias add/gradient, im2col/col2im): hand-computed cases, double
// references, finite differences of every backward, the im2col/col2im adjoint identity and bad-argument errors.
#include <cmath>

#include "kernels/ops.h"
#include "test_ops_util.h"

using namespace veomni;
using namespace veomni::test_ops;

namespace {

Tensor f32(const std::vector<float>& values, const Shape& shape) { return Tensor::from_vector(values, shape); }

struct LayerNormReference {
  Doubles y, mean, rstd, dx, dweight, dbias;
};

// torch.nn.LayerNorm in double (biased variance) and its gradients for upstream dy.
LayerNormReference naive_layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps, const Tensor& dy) {
  const int64_t n = x.dim(0), d = x.dim(1);
  const Doubles xd = to_doubles(x), wd = to_doubles(w), bd = to_doubles(b), dyd = to_doubles(dy);
  const size_t nd = xd.size(), dd = static_cast<size_t>(d);
  LayerNormReference ref{Doubles(nd), Doubles(static_cast<size_t>(n)), Doubles(static_cast<size_t>(n)),
                         Doubles(nd),  Doubles(dd, 0.0),               Doubles(dd, 0.0)};
  for (int64_t r = 0; r < n; ++r) {
    const double* xr = xd.data() + r * d;
    const double* gr = dyd.data() + r * d;
    double mu = 0.0, var = 0.0;
    for (int64_t i = 0; i < d; ++i) mu += xr[i];
    mu /= static_cast<double>(d);
    for (int64_t i = 0; i < d; ++i) var += (xr[i] - mu) * (xr[i] - mu);
    var /= static_cast<double>(d);
    const double rs = 1.0 / std::sqrt(var + eps);
    ref.mean[static_cast<size_t>(r)] = mu;
    ref.rstd[static_cast<size_t>(r)] = rs;
    double mean_g = 0.0, mean_gx = 0.0;
    for (int64_t i = 0; i < d; ++i) {
      const double g = gr[i] * wd[static_cast<size_t>(i)];
      mean_g += g / static_cast<double>(d);
      mean_gx += g * (xr[i] - mu) * rs / static_cast<double>(d);
    }
    for (int64_t i = 0; i < d; ++i) {
      const size_t k = static_cast<size_t>(r * d + i), c = static_cast<size_t>(i);
      const double xhat = (xr[i] - mu) * rs;
      ref.y[k] = xhat * wd[c] + bd[c];
      ref.dx[k] = rs * (gr[i] * wd[c] - mean_g - xhat * mean_gx);
      ref.dweight[c] += gr[i] * xhat;
      ref.dbias[c] += gr[i];
    }
  }
  return ref;
}

double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// Direct 2-D convolution in double: out[(b, oy, ox), o] = sum_{c, ky, kx} x[b, c, iy, ix] * w[o, c, ky, kx] + bias[o].
Doubles naive_conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, int64_t stride, int64_t pad) {
  const int64_t b = x.dim(0), c = x.dim(1), h = x.dim(2), wi = x.dim(3);
  const int64_t o = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  const int64_t ho = (h + 2 * pad - kh) / stride + 1, wo = (wi + 2 * pad - kw) / stride + 1;
  const Doubles xd = to_doubles(x), wd = to_doubles(w), bd = to_doubles(bias);
  Doubles out(static_cast<size_t>(b * ho * wo * o));
  for (int64_t n = 0; n < b; ++n)
    for (int64_t oy = 0; oy < ho; ++oy)
      for (int64_t ox = 0; ox < wo; ++ox)
        for (int64_t oc = 0; oc < o; ++oc) {
          double s = bd[static_cast<size_t>(oc)];
          for (int64_t ic = 0; ic < c; ++ic)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wi) continue;
                s += xd[static_cast<size_t>(((n * c + ic) * h + iy) * wi + ix)] *
                     wd[static_cast<size_t>(((oc * c + ic) * kh + ky) * kw + kx)];
              }
          out[static_cast<size_t>(((n * ho + oy) * wo + ox) * o + oc)] = s;
        }
  return out;
}

// One convolution geometry: input [B, C, H, W], kernel kh x kw, stride, padding.
struct Conv {
  int64_t b, c, h, w, kh, kw, stride, pad;
  int64_t ho() const { return (h + 2 * pad - kh) / stride + 1; }
  int64_t wo() const { return (w + 2 * pad - kw) / stride + 1; }
  Shape image() const { return {b, c, h, w}; }
  Shape cols() const { return {b * ho() * wo(), c * kh * kw}; }
};

// Overlapping taps, the audio encoder's 3x3/2/1 on odd sizes, gaps (stride > kernel), 1x1, a patch-like 2x2/2/0.
const Conv kConvs[] = {{1, 1, 3, 3, 2, 2, 1, 0}, {2, 3, 9, 7, 3, 3, 2, 1}, {1, 2, 8, 5, 2, 1, 3, 0},
                       {2, 2, 4, 4, 1, 1, 1, 0}, {1, 3, 6, 4, 2, 2, 2, 0}, {1, 1, 2, 3, 3, 3, 1, 2}};

}  // namespace

// ---------------------------------------------------------------- LayerNorm

TEST(OpsEncoder, LayerNormHandComputed) {
  // Row 0: mean 2.5, biased variance 1.25, + eps 1 = 2.25 -> rstd 2/3, xhat = [-1, -1/3, 1/3, 1].
  // Row 1: constant -> variance 0, rstd = 1/sqrt(eps) = 1, y = bias.
  const Tensor x = f32({1, 2, 3, 4, 2, 2, 2, 2}, {2, 4});
  const Tensor w = f32({1, 2, 1, 0.5f}, {4});
  const Tensor b = f32({0, 1, -1, 0.5f}, {4});
  Tensor y = Tensor::empty({2, 4}, DType::F32), mean = Tensor::empty({2}, DType::F32);
  Tensor rstd = Tensor::empty({2}, DType::F32);
  ops::layernorm_forward(x, w, b, 1.0f, y, mean, rstd);
  EXPECT_TRUE(all_close(y, {-1.0, 1.0 / 3.0, -2.0 / 3.0, 1.0, 0.0, 1.0, -1.0, 0.5}, 1e-7, 1e-7));
  EXPECT_TRUE(all_close(mean, {2.5, 2.0}, 0.0, 0.0));
  EXPECT_TRUE(all_close(rstd, {2.0 / 3.0, 1.0}, 1e-7, 0.0));

  // dy = 1 on row 0 only, w = [1, 2, 1, 0.5]: g = w, mean(g) = 1.125, mean(g*xhat) = (-1 - 2/3 + 1/3 + 0.5)/4.
  const Tensor dy = f32({1, 1, 1, 1, 0, 0, 0, 0}, {2, 4});
  Tensor dx = Tensor::empty({2, 4}, DType::F32);
  Tensor dw = Tensor::full<float>({4}, 1.0f), db = Tensor::full<float>({4}, 1.0f);
  ops::layernorm_backward(dy, x, w, mean, rstd, dx, dw, db);
  const double xhat[] = {-1.0, -1.0 / 3.0, 1.0 / 3.0, 1.0}, g[] = {1.0, 2.0, 1.0, 0.5};
  const double mean_g = 1.125, mean_gx = (-1.0 - 2.0 / 3.0 + 1.0 / 3.0 + 0.5) / 4.0;
  Doubles dx_want(8, 0.0);
  for (int i = 0; i < 4; ++i) dx_want[static_cast<size_t>(i)] = 2.0 / 3.0 * (g[i] - mean_g - xhat[i] * mean_gx);
  EXPECT_TRUE(all_close(dx, dx_want, 1e-6, 1e-7));
  EXPECT_TRUE(all_close(dw, {0.0, 2.0 / 3.0, 4.0 / 3.0, 2.0}, 1e-7, 1e-7));  // 1 + xhat (accumulated)
  EXPECT_TRUE(all_close(db, {2.0, 2.0, 2.0, 2.0}, 0.0, 0.0));
}

TEST(OpsEncoder, LayerNormMatchesDoubleReference) {
  std::mt19937 rng(21);
  const int64_t shapes[][2] = {{1, 1}, {5, 7}, {33, 131}, {3, 1152}, {200, 64}};
  for (const auto& s : shapes) {
    SCOPED_TRACE(::testing::Message() << "N " << s[0] << " D " << s[1]);
    // An offset mean checks that the variance does not cancel (E[x^2] - E[x]^2 would lose digits here).
    const Tensor x = random_f32({s[0], s[1]}, rng, 3.0f, 5.0f);
    const Tensor w = random_f32({s[1]}, rng, 0.5f, 1.5f);
    const Tensor b = random_f32({s[1]}, rng);
    const Tensor dy = random_f32({s[0], s[1]}, rng);
    const LayerNormReference ref = naive_layernorm(x, w, b, 1e-6, dy);
    Tensor y = Tensor::empty(x.shape(), DType::F32);
    Tensor mean = Tensor::empty({s[0]}, DType::F32), rstd = Tensor::empty({s[0]}, DType::F32);
    ops::layernorm_forward(x, w, b, 1e-6f, y, mean, rstd);
    EXPECT_TRUE(all_close(y, ref.y, 1e-5, 1e-5));
    EXPECT_TRUE(all_close(mean, ref.mean, 1e-7, 0.0));
    // D = 1 has variance 0 and rstd = 1/sqrt(eps) = 1000: still exact to f32.
    EXPECT_TRUE(all_close(rstd, ref.rstd, 1e-6, 0.0));
    Tensor dx = Tensor::empty(x.shape(), DType::F32);
    Tensor dw = Tensor::full<float>({s[1]}, 0.25f), db = Tensor::full<float>({s[1]}, -0.5f);
    ops::layernorm_backward(dy, x, w, mean, rstd, dx, dw, db);
    const double term = max_abs(ref.rstd) * max_abs(to_doubles(w)) * max_abs(to_doubles(dy));
    EXPECT_TRUE(all_close(dx, ref.dx, 1e-5, 1e-5 * term));
    Doubles dw_want = ref.dweight, db_want = ref.dbias;
    for (double& v : dw_want) v += 0.25;
    for (double& v : db_want) v -= 0.5;
    EXPECT_TRUE(all_close(dw, dw_want, 1e-5, 1e-5 * max_abs(dw_want)));
    EXPECT_TRUE(all_close(db, db_want, 1e-5, 1e-5 * max_abs(db_want)));
  }
}

TEST(OpsEncoder, LayerNormBackwardMatchesFiniteDifferences) {
  std::mt19937 rng(22);
  Tensor x = random_f32({4, 9}, rng, -2.0f, 2.0f);
  Tensor w = random_f32({9}, rng, 0.5f, 1.5f);
  Tensor b = random_f32({9}, rng);
  const Tensor proj = random_f32({4, 9}, rng);
  Tensor y = Tensor::empty({4, 9}, DType::F32), mean = Tensor::empty({4}, DType::F32);
  Tensor rstd = Tensor::empty({4}, DType::F32);
  auto loss = [&] {
    ops::layernorm_forward(x, w, b, 1e-5f, y, mean, rstd);
    return project(y, proj);
  };
  loss();
  Tensor dx = Tensor::empty({4, 9}, DType::F32), dw = Tensor::zeros({9}, DType::F32);
  Tensor db = Tensor::zeros({9}, DType::F32);
  ops::layernorm_backward(proj, x, w, mean, rstd, dx, dw, db);
  expect_gradient("dx", x, dx, loss);
  expect_gradient("dweight", w, dw, loss);
  expect_gradient("dbias", b, db, loss);
}

TEST(OpsEncoder, LayerNormIsIndependentOfThreadCount) {
  std::mt19937 rng(23);
  const Tensor x = random_f32({300, 200}, rng), w = random_f32({200}, rng), b = random_f32({200}, rng);
  const Tensor dy = random_f32({300, 200}, rng);
  auto run = [&](int threads) {
    std::vector<Tensor> out{Tensor::empty({300, 200}, DType::F32), Tensor::empty({300}, DType::F32),
                            Tensor::empty({300}, DType::F32),      Tensor::empty({300, 200}, DType::F32),
                            Tensor::zeros({200}, DType::F32),      Tensor::zeros({200}, DType::F32)};
    with_threads(threads, [&] {
      ops::layernorm_forward(x, w, b, 1e-6f, out[0], out[1], out[2]);
      ops::layernorm_backward(dy, x, w, out[1], out[2], out[3], out[4], out[5]);
    });
    return out;
  };
  const auto one = run(1), four = run(4);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(bitwise_equal(one[i], four[i])) << "output " << i;
}

TEST(OpsEncoder, LayerNormRejectsBadArguments) {
  Tensor x = Tensor::zeros({3, 4}, DType::F32), y = Tensor::zeros({3, 4}, DType::F32);
  Tensor w = Tensor::zeros({4}, DType::F32), b = Tensor::zeros({4}, DType::F32);
  Tensor mean = Tensor::zeros({3}, DType::F32), rstd = Tensor::zeros({3}, DType::F32);
  Tensor w5 = Tensor::zeros({5}, DType::F32), mean_i = Tensor::zeros({3}, DType::I32);
  EXPECT_THROW(ops::layernorm_forward(x, w5, b, 1e-6f, y, mean, rstd), Error);
  EXPECT_THROW(ops::layernorm_forward(x, w, w5, 1e-6f, y, mean, rstd), Error);
  EXPECT_THROW(ops::layernorm_forward(x, w, b, 1e-6f, y, mean_i, rstd), Error);
  EXPECT_THROW(ops::layernorm_forward(x, w, b, -1.0f, y, mean, rstd), Error);
  EXPECT_THROW(ops::layernorm_forward(x, w, b, 1e-6f, x, mean, rstd), Error);  // in place is not supported
  EXPECT_THROW(ops::layernorm_forward(x, w, b, 1e-6f, y, mean, mean), Error);  // outputs overlap
  EXPECT_THROW(ops::layernorm_forward(x.view({12}), w, b, 1e-6f, y, mean, rstd), Error);
  EXPECT_THROW(ops::layernorm_forward(x.to_dtype(DType::BF16), w, b, 1e-6f, y, mean, rstd), Error);  // CPU is f32
  const Tensor empty_rows = Tensor::zeros({3, 0}, DType::F32), empty_w = Tensor::zeros({0}, DType::F32);
  Tensor empty_y = Tensor::zeros({3, 0}, DType::F32);
  EXPECT_THROW(ops::layernorm_forward(empty_rows, empty_w, empty_w, 1e-6f, empty_y, mean, rstd), Error);
  Tensor dx = Tensor::zeros({3, 4}, DType::F32), dw = Tensor::zeros({4}, DType::F32);
  Tensor db = Tensor::zeros({4}, DType::F32);
  EXPECT_THROW(ops::layernorm_backward(y, x, w, mean, rstd, dx, w5, db), Error);
  EXPECT_THROW(ops::layernorm_backward(y, x, w, mean, rstd, dx, dw, dw), Error);  // dweight is dbias
  EXPECT_THROW(ops::layernorm_backward(y, x, w, rstd.view({3, 1}), rstd, dx, dw, db), Error);
  EXPECT_NO_THROW(ops::layernorm_forward(x, w, b, 1e-6f, y, mean, rstd));
  EXPECT_NO_THROW(ops::layernorm_backward(y, x, w, mean, rstd, dx, dw, db));
}

// ---------------------------------------------------------------- GELU

TEST(OpsEncoder, GeluKnownValues) {
  const Tensor x = f32({0, 1, -1, 2, -3}, {5});
  Tensor y = Tensor::empty({5}, DType::F32);
  // Values of torch.nn.functional.gelu in double.
  ops::gelu_forward(x, ops::GeluKind::Erf, y);
  EXPECT_TRUE(all_close(y, {0.0, 0.8413447460685429, -0.15865525393145707, 1.9544997361036416, -0.00404969409489031},
                        1e-7, 0.0));
  ops::gelu_forward(x, ops::GeluKind::Tanh, y);
  EXPECT_TRUE(all_close(y,
                        {0.0, 0.8411919906082768, -0.15880800939172324, 1.954597694087775, -0.0036373920817729943},
                        1e-7, 0.0));
  // gelu'(0) = 1/2 for both forms.
  Tensor dx = Tensor::empty({5}, DType::F32);
  ops::gelu_backward(Tensor::full<float>({5}, 1.0f), x, ops::GeluKind::Erf, dx);
  EXPECT_EQ(dx.data<float>()[0], 0.5f);
  ops::gelu_backward(Tensor::full<float>({5}, 1.0f), x, ops::GeluKind::Tanh, dx);
  EXPECT_EQ(dx.data<float>()[0], 0.5f);
}

TEST(OpsEncoder, GeluMatchesFormulasInDouble) {
  std::mt19937 rng(24);
  const Tensor x = random_f32({37, 29}, rng, -6.0f, 6.0f);  // any shape: GELU is elementwise
  const Doubles xd = to_doubles(x);
  for (const auto kind : {ops::GeluKind::Erf, ops::GeluKind::Tanh}) {
    SCOPED_TRACE(kind == ops::GeluKind::Erf ? "erf" : "tanh");
    Doubles want(xd.size());
    for (size_t i = 0; i < xd.size(); ++i) want[i] = kind == ops::GeluKind::Erf ? gelu_erf(xd[i]) : gelu_tanh(xd[i]);
    Tensor y = Tensor::empty({29, 37}, DType::F32);
    ops::gelu_forward(x, kind, y);
    EXPECT_TRUE(all_close(y, want, 1e-6, 1e-7));
  }
}

TEST(OpsEncoder, GeluBackwardMatchesFiniteDifferences) {
  std::mt19937 rng(25);
  for (const auto kind : {ops::GeluKind::Erf, ops::GeluKind::Tanh}) {
    SCOPED_TRACE(kind == ops::GeluKind::Erf ? "erf" : "tanh");
    Tensor x = random_f32({6, 8}, rng, -4.0f, 4.0f);
    const Tensor proj = random_f32({6, 8}, rng);
    Tensor y = Tensor::empty({6, 8}, DType::F32);
    auto loss = [&] {
      ops::gelu_forward(x, kind, y);
      return project(y, proj);
    };
    Tensor dx = Tensor::empty({6, 8}, DType::F32);
    ops::gelu_backward(proj, x, kind, dx);
    // Elementwise: the step is small relative to the curvature, so the check can be tight.
    expect_gradient("dx", x, dx, loss, 1e-3f, 1e-3);
  }
}

TEST(OpsEncoder, GeluRejectsBadArguments) {
  const Tensor x = Tensor::zeros({3, 4}, DType::F32);
  Tensor y = Tensor::zeros({3, 4}, DType::F32), y13 = Tensor::zeros({13}, DType::F32);
  EXPECT_THROW(ops::gelu_forward(x, ops::GeluKind::Erf, y13), Error);
  EXPECT_THROW(ops::gelu_forward(x, static_cast<ops::GeluKind>(7), y), Error);
  Tensor same = x.clone();
  EXPECT_THROW(ops::gelu_forward(same, ops::GeluKind::Erf, same), Error);  // in place
  Tensor y_bf16 = Tensor::zeros({3, 4}, DType::BF16);
  EXPECT_THROW(ops::gelu_forward(x, ops::GeluKind::Erf, y_bf16), Error);
  Tensor dx = Tensor::zeros({3, 4}, DType::F32);
  EXPECT_THROW(ops::gelu_backward(y13, x, ops::GeluKind::Tanh, dx), Error);
  EXPECT_THROW(ops::gelu_backward(y, x, ops::GeluKind::Tanh, y), Error);  // dx is dy
  Tensor flat = y.view({12});
  EXPECT_NO_THROW(ops::gelu_forward(x, ops::GeluKind::Erf, flat));
  EXPECT_NO_THROW(ops::gelu_backward(y, x, ops::GeluKind::Tanh, dx));
}

// ---------------------------------------------------------------- bias

TEST(OpsEncoder, AddBiasAndBiasGradHandComputed) {
  Tensor y = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  ops::add_bias_(y, f32({10, 20, 30}, {3}));
  EXPECT_TRUE(all_close(y, {11, 22, 33, 14, 25, 36}, 0.0, 0.0));
  Tensor db = f32({1, 1, 1}, {3});
  ops::bias_grad(f32({1, 2, 3, 4, 5, 6}, {2, 3}), db);
  EXPECT_TRUE(all_close(db, {6, 8, 10}, 0.0, 0.0));  // accumulates: 1 + column sums
}

TEST(OpsEncoder, BiasGradIsTheBackwardOfAddBias) {
  std::mt19937 rng(26);
  const Tensor base = random_f32({7, 5}, rng);
  Tensor bias = random_f32({5}, rng);
  const Tensor proj = random_f32({7, 5}, rng);
  auto loss = [&] {
    Tensor y = base.clone();
    ops::add_bias_(y, bias);
    return project(y, proj);
  };
  Tensor db = Tensor::zeros({5}, DType::F32);
  ops::bias_grad(proj, db);
  expect_gradient("dbias", bias, db, loss, 1e-2f, 1e-4);
}

TEST(OpsEncoder, BiasGradIsIndependentOfThreadCount) {
  std::mt19937 rng(27);
  const Tensor dy = random_f32({2000, 300}, rng);
  Tensor one = Tensor::zeros({300}, DType::F32), four = Tensor::zeros({300}, DType::F32);
  with_threads(1, [&] { ops::bias_grad(dy, one); });
  with_threads(4, [&] { ops::bias_grad(dy, four); });
  EXPECT_TRUE(bitwise_equal(one, four));
}

TEST(OpsEncoder, BiasOpsRejectBadArguments) {
  Tensor y = Tensor::zeros({3, 4}, DType::F32), b = Tensor::zeros({4}, DType::F32);
  EXPECT_THROW(ops::add_bias_(y, Tensor::zeros({3}, DType::F32)), Error);
  EXPECT_THROW(ops::add_bias_(y, Tensor::zeros({1, 4}, DType::F32)), Error);
  Tensor y1 = y.view({12});
  EXPECT_THROW(ops::add_bias_(y1, b), Error);
  EXPECT_THROW(ops::bias_grad(y, y), Error);
  Tensor b_i = Tensor::zeros({4}, DType::I32);
  EXPECT_THROW(ops::bias_grad(y, b_i), Error);
  Tensor row0 = y.select(0);
  EXPECT_THROW(ops::add_bias_(y, row0), Error);  // bias inside y
  EXPECT_NO_THROW(ops::add_bias_(y, b));
  EXPECT_NO_THROW(ops::bias_grad(y, b));
}

// ---------------------------------------------------------------- im2col / col2im

TEST(OpsEncoder, Im2colHandComputed) {
  const Tensor x = f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor cols = Tensor::empty({4, 4}, DType::F32);
  ops::im2col_2d(x, 2, 2, 1, 0, cols);
  EXPECT_TRUE(all_close(cols, {1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9}, 0.0, 0.0));
  // 3x3, stride 2, padding 1: Ho = Wo = (3 + 2 - 3)/2 + 1 = 2; the corners read the zero border.
  Tensor padded = Tensor::empty({4, 9}, DType::F32);
  ops::im2col_2d(x, 3, 3, 2, 1, padded);
  EXPECT_TRUE(all_close(padded,
                        {0, 0, 0, 0, 1, 2, 0, 4, 5,  //
                         0, 0, 0, 2, 3, 0, 5, 6, 0,  //
                         0, 4, 5, 0, 7, 8, 0, 0, 0,  //
                         5, 6, 0, 8, 9, 0, 0, 0, 0},
                        0.0, 0.0));
  // Two channels, two images: column order (c, ky, kx), row order (b, oy, ox).
  const Tensor x2 = f32({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 1, 2});
  Tensor cols2 = Tensor::empty({2, 4}, DType::F32);
  ops::im2col_2d(x2, 1, 2, 1, 0, cols2);
  EXPECT_TRUE(all_close(cols2, {1, 2, 3, 4, 5, 6, 7, 8}, 0.0, 0.0));
}

TEST(OpsEncoder, Col2imCountsOverlaps) {
  // All-ones columns: each input element receives one term per (output, tap) pair that reads it.
  Tensor dx = Tensor::empty({1, 1, 3, 3}, DType::F32);
  ops::col2im_2d(Tensor::full<float>({4, 4}, 1.0f), 2, 2, 1, 0, dx);
  EXPECT_TRUE(all_close(dx, {1, 2, 1, 2, 4, 2, 1, 2, 1}, 0.0, 0.0));
  ops::col2im_2d(Tensor::full<float>({4, 9}, 1.0f), 3, 3, 2, 1, dx);
  EXPECT_TRUE(all_close(dx, {1, 2, 1, 2, 4, 2, 1, 2, 1}, 0.0, 0.0));
  // Stride 3 over a 1x1 kernel on 1x5: only columns 0 and 3 are read.
  Tensor gaps = Tensor::full<float>({1, 1, 1, 5}, 9.0f);  // overwritten
  ops::col2im_2d(f32({2, 3}, {2, 1}), 1, 1, 3, 0, gaps);
  EXPECT_TRUE(all_close(gaps, {2, 0, 0, 3, 0}, 0.0, 0.0));
}

TEST(OpsEncoder, Col2imIsTheAdjointOfIm2col) {
  std::mt19937 rng(28);
  for (const Conv& g : kConvs) {
    SCOPED_TRACE(::testing::Message() << "B" << g.b << " C" << g.c << " " << g.h << "x" << g.w << " k" << g.kh << "x"
                                      << g.kw << " s" << g.stride << " p" << g.pad);
    const Tensor image = random_f32(g.image(), rng);
    const Tensor dcols = random_f32(g.cols(), rng);
    Tensor cols = Tensor::empty(g.cols(), DType::F32), dx = Tensor::empty(g.image(), DType::F32);
    ops::im2col_2d(image, g.kh, g.kw, g.stride, g.pad, cols);
    ops::col2im_2d(dcols, g.kh, g.kw, g.stride, g.pad, dx);
    // <col2im(a), b> == <a, im2col(b)>: im2col only copies, so both sides are sums of the same f32 products.
    const double lhs = project(dx, image), rhs = project(dcols, cols);
    EXPECT_NEAR(lhs, rhs, 1e-6 * (std::fabs(rhs) + 1.0));
  }
}

TEST(OpsEncoder, Col2imMatchesFiniteDifferencesOfIm2col) {
  std::mt19937 rng(29);
  const Conv g = kConvs[1];
  Tensor image = random_f32(g.image(), rng);
  const Tensor proj = random_f32(g.cols(), rng);
  Tensor cols = Tensor::empty(g.cols(), DType::F32);
  auto loss = [&] {
    ops::im2col_2d(image, g.kh, g.kw, g.stride, g.pad, cols);
    return project(cols, proj);
  };
  Tensor dx = Tensor::empty(g.image(), DType::F32);
  ops::col2im_2d(proj, g.kh, g.kw, g.stride, g.pad, dx);
  expect_gradient("dx", image, dx, loss, 1e-2f, 1e-4);
}

TEST(OpsEncoder, Im2colMatmulIsADirectConvolution) {
  std::mt19937 rng(30);
  for (const Conv& g : kConvs) {
    SCOPED_TRACE(::testing::Message() << "k" << g.kh << "x" << g.kw << " s" << g.stride << " p" << g.pad);
    const int64_t out_channels = 5;
    const Tensor image = random_f32(g.image(), rng);
    const Tensor weight = random_f32({out_channels, g.c, g.kh, g.kw}, rng);
    const Tensor bias = random_f32({out_channels}, rng);
    Tensor cols = Tensor::empty(g.cols(), DType::F32);
    ops::im2col_2d(image, g.kh, g.kw, g.stride, g.pad, cols);
    Tensor out = Tensor::empty({g.cols()[0], out_channels}, DType::F32);
    ops::matmul(cols, false, weight.view({out_channels, g.c * g.kh * g.kw}), true, out);
    ops::add_bias_(out, bias);
    const Doubles want = naive_conv2d(image, weight, bias, g.stride, g.pad);
    EXPECT_TRUE(all_close(out, want, 1e-5, 1e-5 * max_abs(want)));
  }
}

TEST(OpsEncoder, Col2imIsIndependentOfThreadCount) {
  std::mt19937 rng(31);
  const Conv g{4, 16, 64, 50, 3, 3, 2, 1};
  const Tensor dcols = random_f32(g.cols(), rng);
  Tensor one = Tensor::empty(g.image(), DType::F32), four = Tensor::empty(g.image(), DType::F32);
  with_threads(1, [&] { ops::col2im_2d(dcols, g.kh, g.kw, g.stride, g.pad, one); });
  with_threads(4, [&] { ops::col2im_2d(dcols, g.kh, g.kw, g.stride, g.pad, four); });
  EXPECT_TRUE(bitwise_equal(one, four));
}

TEST(OpsEncoder, Im2colCol2imRejectBadArguments) {
  const Tensor x = Tensor::zeros({1, 2, 5, 5}, DType::F32);
  Tensor cols = Tensor::zeros({9, 18}, DType::F32);  // 3x3 kernel, stride 2, padding 1: Ho = Wo = 3
  EXPECT_NO_THROW(ops::im2col_2d(x, 3, 3, 2, 1, cols));
  Tensor wrong = Tensor::zeros({9, 17}, DType::F32);
  EXPECT_THROW(ops::im2col_2d(x, 3, 3, 2, 1, wrong), Error);
  EXPECT_THROW(ops::im2col_2d(x, 3, 3, 1, 1, cols), Error);   // stride 1 makes 25 rows
  EXPECT_THROW(ops::im2col_2d(x, 3, 3, 0, 1, cols), Error);   // stride 0
  EXPECT_THROW(ops::im2col_2d(x, 3, 3, 2, -1, cols), Error);  // negative padding
  EXPECT_THROW(ops::im2col_2d(x, 0, 3, 2, 1, cols), Error);   // empty kernel
  Tensor big = Tensor::zeros({1, 18}, DType::F32);
  EXPECT_THROW(ops::im2col_2d(x, 8, 8, 1, 1, big), Error);  // kernel larger than the padded input
  EXPECT_THROW(ops::im2col_2d(x.view({2, 5, 5}), 3, 3, 2, 1, cols), Error);
  EXPECT_THROW(ops::im2col_2d(x.to_dtype(DType::BF16), 3, 3, 2, 1, cols), Error);
  Tensor dx = Tensor::zeros({1, 2, 5, 5}, DType::F32);
  EXPECT_NO_THROW(ops::col2im_2d(cols, 3, 3, 2, 1, dx));
  EXPECT_THROW(ops::col2im_2d(wrong, 3, 3, 2, 1, dx), Error);
  EXPECT_THROW(ops::col2im_2d(cols, 3, 3, 2, 0, dx), Error);  // padding 0 makes 2x2 outputs
  Tensor dx_i = Tensor::zeros({1, 2, 5, 5}, DType::I32);
  EXPECT_THROW(ops::col2im_2d(cols, 3, 3, 2, 1, dx_i), Error);
  // A 9x9 kernel over 9x9 images makes one row of 162 columns: dcols and dx have the same size, here the same memory.
  const Tensor one_row = cols.view({1, 162});
  Tensor alias = cols.view({1, 2, 9, 9});
  EXPECT_THROW(ops::col2im_2d(one_row, 9, 9, 1, 0, alias), Error);
  Tensor own = Tensor::zeros({1, 2, 9, 9}, DType::F32);
  EXPECT_NO_THROW(ops::col2im_2d(one_row, 9, 9, 1, 0, own));
}
