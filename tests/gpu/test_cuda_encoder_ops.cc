// GPU tests of the encoder ops against their CPU twins: LayerNorm, GELU (erf and tanh), bias add and gradient,
// im2col / col2im, in f32 and bf16 (tolerances of gpu_test_util.h: rtol 1e-5 for f32 outputs and the f32 statistics
// and weight gradients, 1e-2 for bf16 outputs; im2col only copies, so it must match exactly), plus determinism and
// error paths.
#include <cmath>

#include "gpu_test_util.h"
#include "kernels/ops.h"

using namespace veomni;
using namespace veomni::gpu_test;

namespace {

class CudaEncoderOps : public CudaTest {};

// One convolution geometry: input [B, C, H, W], kernel kh x kw, stride, padding.
struct Conv {
  int64_t b, c, h, w, kh, kw, stride, pad;
  int64_t ho() const { return (h + 2 * pad - kh) / stride + 1; }
  int64_t wo() const { return (w + 2 * pad - kw) / stride + 1; }
  Shape image() const { return {b, c, h, w}; }
  Shape cols() const { return {b * ho() * wo(), c * kh * kw}; }
};

// Overlapping taps, the audio encoder's 3x3/2/1 stem (one mel chunk, then a 32-channel layer), gaps, 1x1, padding
// wider than the image.
const Conv kConvs[] = {{1, 1, 3, 3, 2, 2, 1, 0},    {2, 1, 128, 100, 3, 3, 2, 1}, {3, 32, 64, 50, 3, 3, 2, 1},
                       {1, 2, 8, 5, 2, 1, 3, 0},    {2, 2, 4, 4, 1, 1, 1, 0},     {1, 1, 2, 3, 3, 3, 1, 2}};

const ops::GeluKind kGeluKinds[] = {ops::GeluKind::Erf, ops::GeluKind::Tanh};

const char* kind_name(ops::GeluKind kind) { return kind == ops::GeluKind::Erf ? "erf" : "tanh"; }

}  // namespace

// ---------------------------------------------------------------- LayerNorm

TEST_F(CudaEncoderOps, LayerNormForwardAndBackwardMatchCpu) {
  std::mt19937 rng(61);
  for (DType dtype : float_dtypes())
    for (const auto& [n, d] : {std::pair<int64_t, int64_t>{37, 129}, {5, 1152}, {300, 128}, {1, 7}, {2, 1}}) {
      SCOPED_TRACE(fmt::format("{} n {} d {}", dtype_name(dtype), n, d));
      // An offset mean: the variance must be taken around the mean, not as E[x^2] - E[x]^2.
      const Tensor x = representable(random_f32({n, d}, rng, 2.0f, 4.0f), dtype);
      const Tensor w = representable(random_f32({d}, rng, 0.5f, 1.5f), dtype);
      const Tensor b = representable(random_f32({d}, rng), dtype);
      const Tensor dy = representable(random_f32({n, d}, rng), dtype);
      const Tensor dw0 = random_f32({d}, rng), db0 = random_f32({d}, rng);
      Tensor y = Tensor::empty({n, d}, DType::F32), mean = Tensor::empty({n}, DType::F32);
      Tensor rstd = Tensor::empty({n}, DType::F32), dx = Tensor::empty({n, d}, DType::F32);
      Tensor dw = dw0.clone(), db = db0.clone();
      ops::layernorm_forward(x, w, b, 1e-6f, y, mean, rstd);
      ops::layernorm_backward(dy, x, w, mean, rstd, dx, dw, db);

      const Tensor gx = to_gpu(x, dtype), gw = to_gpu(w, dtype), gb = to_gpu(b, dtype), gdy = to_gpu(dy, dtype);
      Tensor gy = Tensor::empty({n, d}, dtype, gpu()), gmean = Tensor::empty({n}, DType::F32, gpu());
      Tensor grstd = Tensor::empty({n}, DType::F32, gpu()), gdx = Tensor::empty({n, d}, dtype, gpu());
      Tensor gdw = to_gpu(dw0), gdb = to_gpu(db0);  // parameter gradients stay f32
      ops::layernorm_forward(gx, gw, gb, 1e-6f, gy, gmean, grstd);
      ops::layernorm_backward(gdy, gx, gw, gmean, grstd, gdx, gdw, gdb);
      EXPECT_TRUE(close_to(gmean, mean, kF32Rtol));
      // d = 1: variance 0 and rstd = 1/sqrt(eps) on both sides.
      EXPECT_TRUE(close_to(grstd, rstd, kF32Rtol));
      EXPECT_TRUE(close_to(gy, y, rtol_for(dtype)));
      EXPECT_TRUE(close_to(gdx, dx, rtol_for(dtype)));
      EXPECT_TRUE(close_to(gdw, dw, kF32Rtol));
      EXPECT_TRUE(close_to(gdb, db, kF32Rtol));
    }
}

TEST_F(CudaEncoderOps, LayerNormAcceptsBf16ParameterGradients) {
  std::mt19937 rng(62);
  const int64_t n = 40, d = 96;
  const Tensor x = representable(random_f32({n, d}, rng), DType::BF16);
  const Tensor w = random_f32({d}, rng), dy = representable(random_f32({n, d}, rng), DType::BF16);
  Tensor y = Tensor::empty({n, d}, DType::F32), mean = Tensor::empty({n}, DType::F32);
  Tensor rstd = Tensor::empty({n}, DType::F32), dx = Tensor::empty({n, d}, DType::F32);
  Tensor dw = Tensor::zeros({d}, DType::F32), db = Tensor::zeros({d}, DType::F32);
  ops::layernorm_forward(x, w, w, 1e-5f, y, mean, rstd);
  ops::layernorm_backward(dy, x, w, mean, rstd, dx, dw, db);
  const Tensor gx = to_gpu(x, DType::BF16), gw = to_gpu(w);
  Tensor gy = Tensor::empty({n, d}, DType::F32, gpu()), gmean = Tensor::empty({n}, DType::F32, gpu());
  Tensor grstd = Tensor::empty({n}, DType::F32, gpu()), gdx = Tensor::empty({n, d}, DType::F32, gpu());
  Tensor gdw = Tensor::zeros({d}, DType::BF16, gpu()), gdb = Tensor::zeros({d}, DType::BF16, gpu());
  ops::layernorm_forward(gx, gw, gw, 1e-5f, gy, gmean, grstd);  // bf16 x with f32 parameters
  ops::layernorm_backward(to_gpu(dy, DType::BF16), gx, gw, gmean, grstd, gdx, gdw, gdb);
  EXPECT_TRUE(close_to(gy, y, kF32Rtol));  // an f32 output of bf16 inputs keeps f32 precision
  EXPECT_TRUE(close_to(gdx, dx, kF32Rtol));
  EXPECT_TRUE(close_to(gdw, dw, kBf16Rtol));
  EXPECT_TRUE(close_to(gdb, db, kBf16Rtol));
}

TEST_F(CudaEncoderOps, LayerNormParameterGradientsAreDeterministic) {
  std::mt19937 rng(63);
  const int64_t n = 4099, d = 96;
  const Tensor x = to_gpu(random_f32({n, d}, rng), DType::BF16), dy = to_gpu(random_f32({n, d}, rng), DType::BF16);
  const Tensor w = to_gpu(random_f32({d}, rng)), b = to_gpu(random_f32({d}, rng));
  Tensor y = Tensor::empty({n, d}, DType::BF16, gpu()), mean = Tensor::empty({n}, DType::F32, gpu());
  Tensor rstd = Tensor::empty({n}, DType::F32, gpu()), dx = Tensor::empty({n, d}, DType::BF16, gpu());
  ops::layernorm_forward(x, w, b, 1e-6f, y, mean, rstd);
  Tensor dw1 = Tensor::zeros({d}, DType::F32, gpu()), dw2 = Tensor::zeros({d}, DType::F32, gpu());
  Tensor db1 = Tensor::zeros({d}, DType::F32, gpu()), db2 = Tensor::zeros({d}, DType::F32, gpu());
  ops::layernorm_backward(dy, x, w, mean, rstd, dx, dw1, db1);
  ops::layernorm_backward(dy, x, w, mean, rstd, dx, dw2, db2);
  EXPECT_TRUE(bitwise_equal(dw1, dw2));
  EXPECT_TRUE(bitwise_equal(db1, db2));
}

// ---------------------------------------------------------------- GELU and bias

TEST_F(CudaEncoderOps, GeluForwardAndBackwardMatchCpu) {
  std::mt19937 rng(64);
  for (DType dtype : float_dtypes())
    for (ops::GeluKind kind : kGeluKinds)
      for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{4099}, int64_t{1000003}}) {
        SCOPED_TRACE(fmt::format("{} {} n {}", dtype_name(dtype), kind_name(kind), n));
        const Tensor x = representable(random_f32({n}, rng, -6.0f, 6.0f), dtype);
        const Tensor dy = representable(random_f32({n}, rng), dtype);
        Tensor y = Tensor::empty({n}, DType::F32), dx = Tensor::empty({n}, DType::F32);
        ops::gelu_forward(x, kind, y);
        ops::gelu_backward(dy, x, kind, dx);
        const Tensor gx = to_gpu(x, dtype);
        Tensor gy = Tensor::empty({n}, dtype, gpu()), gdx = Tensor::empty({n}, dtype, gpu());
        ops::gelu_forward(gx, kind, gy);
        ops::gelu_backward(to_gpu(dy, dtype), gx, kind, gdx);
        EXPECT_TRUE(close_to(gy, y, rtol_for(dtype)));
        EXPECT_TRUE(close_to(gdx, dx, rtol_for(dtype)));
      }
}

TEST_F(CudaEncoderOps, AddBiasAndBiasGradMatchCpu) {
  std::mt19937 rng(65);
  for (DType dtype : float_dtypes())
    for (const auto& [n, d] : {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {3000, 1280}, {4099, 5}}) {
      SCOPED_TRACE(fmt::format("{} n {} d {}", dtype_name(dtype), n, d));
      const Tensor y0 = representable(random_f32({n, d}, rng), dtype);
      const Tensor bias = representable(random_f32({d}, rng), dtype);
      const Tensor db0 = random_f32({d}, rng);
      Tensor y = y0.clone(), db = db0.clone();
      ops::add_bias_(y, bias);
      ops::bias_grad(y0, db);
      Tensor gy = to_gpu(y0, dtype), gdb = to_gpu(db0);
      ops::add_bias_(gy, to_gpu(bias, dtype));
      ops::bias_grad(to_gpu(y0, dtype), gdb);
      EXPECT_TRUE(close_to(gy, y, rtol_for(dtype)));
      EXPECT_TRUE(close_to(gdb, db, kF32Rtol));  // column sums of bf16 inputs into an f32 gradient
    }
  // Mixed: a bf16 activation with an f32 bias.
  const Tensor y0 = representable(random_f32({9, 17}, rng), DType::BF16), bias = random_f32({17}, rng);
  Tensor want = y0.clone();
  ops::add_bias_(want, bias);
  Tensor got = to_gpu(y0, DType::BF16);
  ops::add_bias_(got, to_gpu(bias));
  EXPECT_TRUE(close_to(got, want, kBf16Rtol));
}

TEST_F(CudaEncoderOps, BiasGradIsDeterministic) {
  std::mt19937 rng(66);
  const Tensor dy = to_gpu(random_f32({40000, 64}, rng), DType::BF16);
  Tensor a = Tensor::zeros({64}, DType::F32, gpu()), b = Tensor::zeros({64}, DType::F32, gpu());
  ops::bias_grad(dy, a);
  ops::bias_grad(dy, b);
  EXPECT_TRUE(bitwise_equal(a, b));
}

// ---------------------------------------------------------------- im2col / col2im

TEST_F(CudaEncoderOps, Im2colAndCol2imMatchCpu) {
  std::mt19937 rng(67);
  for (DType dtype : float_dtypes())
    for (const Conv& g : kConvs) {
      SCOPED_TRACE(fmt::format("{} B{} C{} {}x{} k{}x{} s{} p{}", dtype_name(dtype), g.b, g.c, g.h, g.w, g.kh, g.kw,
                               g.stride, g.pad));
      const Tensor image = representable(random_f32(g.image(), rng), dtype);
      const Tensor dcols = representable(random_f32(g.cols(), rng), dtype);
      Tensor cols = Tensor::empty(g.cols(), DType::F32), dx = Tensor::empty(g.image(), DType::F32);
      ops::im2col_2d(image, g.kh, g.kw, g.stride, g.pad, cols);
      ops::col2im_2d(dcols, g.kh, g.kw, g.stride, g.pad, dx);
      Tensor gcols = Tensor::empty(g.cols(), dtype, gpu());
      Tensor gdx = Tensor::full<float>(g.image(), 7.0f).to_dtype(dtype).to(gpu());  // overwritten
      ops::im2col_2d(to_gpu(image, dtype), g.kh, g.kw, g.stride, g.pad, gcols);
      ops::col2im_2d(to_gpu(dcols, dtype), g.kh, g.kw, g.stride, g.pad, gdx);
      EXPECT_TRUE(close_to(gcols, cols, 0.0));
      EXPECT_TRUE(close_to(gdx, dx, rtol_for(dtype)));
    }
}

TEST_F(CudaEncoderOps, Col2imIsDeterministic) {
  std::mt19937 rng(68);
  const Conv g = kConvs[2];
  const Tensor dcols = to_gpu(random_f32(g.cols(), rng));
  Tensor a = Tensor::empty(g.image(), DType::F32, gpu()), b = Tensor::empty(g.image(), DType::F32, gpu());
  ops::col2im_2d(dcols, g.kh, g.kw, g.stride, g.pad, a);
  ops::col2im_2d(dcols, g.kh, g.kw, g.stride, g.pad, b);
  EXPECT_TRUE(bitwise_equal(a, b));
}

// ---------------------------------------------------------------- errors

TEST_F(CudaEncoderOps, RejectBadArguments) {
  const Tensor x = Tensor::zeros({3, 4}, DType::BF16, gpu());
  Tensor y = Tensor::zeros({3, 4}, DType::BF16, gpu());
  const Tensor w = Tensor::zeros({4}, DType::F32, gpu());
  Tensor mean = Tensor::zeros({3}, DType::F32, gpu()), rstd = Tensor::zeros({3}, DType::F32, gpu());
  Tensor mean_bf16 = Tensor::zeros({3}, DType::BF16, gpu());
  EXPECT_NO_THROW(ops::layernorm_forward(x, w, w, 1e-6f, y, mean, rstd));
  EXPECT_THROW(ops::layernorm_forward(x, w, w, 1e-6f, y, mean_bf16, rstd), Error);  // statistics are f32
  EXPECT_THROW(ops::layernorm_forward(x, Tensor::zeros({4}, DType::F32), w, 1e-6f, y, mean, rstd), Error);  // host
  Tensor y_i = Tensor::zeros({3, 4}, DType::I32, gpu());
  EXPECT_THROW(ops::gelu_forward(x, ops::GeluKind::Erf, y_i), Error);
  EXPECT_THROW(ops::add_bias_(y, Tensor::zeros({3}, DType::F32, gpu())), Error);
  Tensor cols = Tensor::zeros({4, 4}, DType::BF16, gpu());
  const Tensor image = Tensor::zeros({1, 1, 3, 3}, DType::BF16, gpu());
  EXPECT_NO_THROW(ops::im2col_2d(image, 2, 2, 1, 0, cols));
  EXPECT_THROW(ops::im2col_2d(image, 2, 2, 2, 0, cols), Error);  // stride 2 makes one row
  cuda_rt::synchronize();
}
