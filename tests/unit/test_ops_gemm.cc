// Tests of the GEMM ops (matmul, grouped_matmul and its weight gradient) against double-precision triple loops.
#include <array>
#include <cmath>
#include <limits>

#include "kernels/cpu/gemm.h"
#include "kernels/ops.h"
#include "test_ops_util.h"

using namespace veomni;
using namespace veomni::test_ops;

namespace {

// op(t)[i][p] of a row-major 2-D tensor held as doubles with `cols` columns.
double gemm_at(const Doubles& t, int64_t cols, bool trans, int64_t i, int64_t p) {
  return t[static_cast<size_t>(trans ? p * cols + i : i * cols + p)];
}

// Reference out = alpha * op(a) op(b) + beta * out and a bound on the f32 rounding of each element.
void naive_matmul(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& out, float alpha, float beta,
                  Doubles& want, Doubles& bound) {
  const int64_t m = out.dim(0), n = out.dim(1), k = ta ? a.dim(0) : a.dim(1);
  const Doubles ad = to_doubles(a), bd = to_doubles(b), cd = to_doubles(out);
  want.assign(static_cast<size_t>(m * n), 0.0);
  bound.assign(want.size(), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0, mag = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double term = gemm_at(ad, a.dim(1), ta, i, p) * gemm_at(bd, b.dim(1), tb, p, j);
        s += term;
        mag += std::fabs(term);
      }
      const double c = beta == 0.0f ? 0.0 : beta * cd[static_cast<size_t>(i * n + j)];
      want[static_cast<size_t>(i * n + j)] = alpha * s + c;
      bound[static_cast<size_t>(i * n + j)] = std::fabs(alpha) * mag + std::fabs(c);
    }
}

// Every element within 1e-5 of its magnitude bound (sum of |terms|): the relative error of an f32 dot product.
void expect_gemm_matches(const Tensor& got, const Doubles& want, const Doubles& bound) {
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got.item_as_double(static_cast<int64_t>(i));
    ASSERT_LE(std::fabs(g - want[i]), 1e-5 * bound[i] + 1e-30)
        << "element " << i << " got " << g << " want " << want[i];
  }
}

Tensor operand(int64_t rows, int64_t cols, bool trans, std::mt19937& rng) {
  return trans ? random_f32({cols, rows}, rng) : random_f32({rows, cols}, rng);
}

}  // namespace

TEST(OpsGemm, MatmulAllTransposesAndAwkwardSizes) {
  std::mt19937 rng(1);
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {65, 67, 259}, {130, 9, 300}, {3, 300, 17}, {8, 8, 512}};
  for (const auto& s : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "m,n,k = " << s[0] << "," << s[1] << "," << s[2] << " ta " << ta << " tb " << tb);
        const Tensor a = operand(s[0], s[2], ta, rng);
        const Tensor b = operand(s[2], s[1], tb, rng);
        Tensor out = Tensor::full<float>({s[0], s[1]}, std::numeric_limits<float>::quiet_NaN());
        Doubles want, bound;
        naive_matmul(a, ta, b, tb, out, 1.0f, 0.0f, want, bound);
        ops::matmul(a, ta, b, tb, out);  // beta = 0 overwrites, NaN included
        expect_gemm_matches(out, want, bound);
      }
}

TEST(OpsGemm, MatmulAlphaBetaAccumulate) {
  std::mt19937 rng(2);
  const Tensor a = random_f32({37, 70}, rng);
  const Tensor b = random_f32({41, 70}, rng);
  Tensor out = random_f32({37, 41}, rng);
  Doubles want, bound;
  naive_matmul(a, false, b, true, out, 0.5f, -2.0f, want, bound);
  ops::matmul(a, false, b, true, out, 0.5f, -2.0f);
  expect_gemm_matches(out, want, bound);
}

// An addend stands in for out on the right: out = alpha * a b^T + beta * addend, out's old values (NaN here) unread,
// the addend untouched; the bits of the same GEMM accumulating onto a copy of the addend. k = 0 gives beta * addend.
TEST(OpsGemm, MatmulAddsAnAddendInsteadOfOut) {
  std::mt19937 rng(3);
  const Tensor a = random_f32({37, 70}, rng), b = random_f32({41, 70}, rng);
  const Tensor addend = random_f32({37, 41}, rng), addend_before = addend.clone();
  Tensor want = addend.clone();
  ops::matmul(a, false, b, true, want, 0.5f, 1.5f);
  Tensor out = Tensor::full<float>({37, 41}, NAN);
  ops::matmul(a, false, b, true, out, 0.5f, 1.5f, addend);
  EXPECT_TRUE(bitwise_equal(out, want));
  EXPECT_TRUE(bitwise_equal(addend, addend_before));
  Tensor empty_k = Tensor::full<float>({37, 41}, NAN);
  ops::matmul(Tensor::empty({37, 0}, DType::F32), false, Tensor::empty({41, 0}, DType::F32), true, empty_k, 1.0f,
              2.0f, addend);
  Tensor doubled = addend.clone();
  ops::scale_(doubled, 2.0f);
  EXPECT_TRUE(bitwise_equal(empty_k, doubled));
}

TEST(OpsGemm, MatmulWithEmptyInnerDimensionScalesOut) {
  const Tensor a = Tensor::empty({3, 0}, DType::F32);
  const Tensor b = Tensor::empty({0, 2}, DType::F32);
  Tensor out = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  ops::matmul(a, false, b, false, out, 1.0f, 2.0f);
  EXPECT_EQ(out.to_float_vector(), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  ops::matmul(a, false, b, false, out);
  EXPECT_EQ(out.to_float_vector(), std::vector<float>(6, 0.0f));
}

TEST(OpsGemm, MatmulIsBitwiseIndependentOfThreadCount) {
  std::mt19937 rng(3);
  const Tensor a = random_f32({200, 520}, rng);
  const Tensor b = random_f32({300, 520}, rng);
  Tensor one = Tensor::empty({200, 300}, DType::F32), two = one.clone(), three = one.clone();
  with_threads(1, [&] { ops::matmul(a, false, b, true, one); });
  with_threads(2, [&] { ops::matmul(a, false, b, true, two); });
  with_threads(3, [&] { ops::matmul(a, false, b, true, three); });
  EXPECT_TRUE(bitwise_equal(one, two));
  EXPECT_TRUE(bitwise_equal(one, three));
}

// The wider micro-kernels must not change a bit: a fused multiply-add (which AVX-512 brings, should gemm.cc lose its
// -ffp-contract=off) or another summation order would. Edge tiles, k across slices, every transpose and beta.
TEST(OpsGemm, EveryInstructionSetGivesTheBaselineBits) {
  std::mt19937 rng(11);
  int compared = 0;
  for (const auto [m, n, k] : {std::array<int64_t, 3>{13, 37, 300}, {100, 17, 513}, {1, 200, 64}})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        const Tensor a = random_f32(ta ? Shape{k, m} : Shape{m, k}, rng);
        const Tensor b = random_f32(tb ? Shape{n, k} : Shape{k, n}, rng);
        const Tensor c0 = random_f32({m, n}, rng);
        ops::cpu::GemmProblem g{.m = m, .n = n, .k = k, .a = a.data<float>(), .lda = a.dim(1), .trans_a = ta,
                                .b = b.data<float>(), .ldb = b.dim(1), .trans_b = tb, .alpha = 0.75f, .beta = 0.5f};
        Tensor want = c0.clone();
        g.c = want.data<float>();
        g.ldc = n;
        ops::cpu::gemm({g}, ops::cpu::GemmIsa::baseline);
        for (const auto isa : {ops::cpu::GemmIsa::avx2, ops::cpu::GemmIsa::avx512}) {
          if (!ops::cpu::gemm_isa_available(isa)) continue;
          Tensor got = c0.clone();
          g.c = got.data<float>();
          ops::cpu::gemm({g}, isa);
          EXPECT_TRUE(bitwise_equal(want, got)) << ops::cpu::gemm_isa_name(isa) << " m=" << m << " n=" << n
                                                << " k=" << k << " ta=" << ta << " tb=" << tb;
          ++compared;
        }
      }
  if (compared == 0) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
}

TEST(OpsGemm, MatmulRejectsBadShapesDtypesAndAliasing) {
  Tensor a = Tensor::zeros({4, 3}, DType::F32);
  Tensor b = Tensor::zeros({5, 3}, DType::F32);
  Tensor out = Tensor::zeros({4, 5}, DType::F32);
  EXPECT_THROW(ops::matmul(a, false, b, false, out), Error);  // inner 3 vs 5
  Tensor wrong = Tensor::zeros({5, 4}, DType::F32);
  EXPECT_THROW(ops::matmul(a, false, b, true, wrong), Error);
  Tensor ints = Tensor::zeros({4, 3}, DType::I32);
  EXPECT_THROW(ops::matmul(ints, false, b, true, out), Error);
  Tensor three_d = Tensor::zeros({1, 4, 3}, DType::F32);
  EXPECT_THROW(ops::matmul(three_d, false, b, true, out), Error);
  Tensor square = Tensor::zeros({3, 3}, DType::F32);
  EXPECT_THROW(ops::matmul(square, false, square, false, square), Error);  // out overlaps its inputs
  EXPECT_NO_THROW(ops::matmul(a, false, b, true, out));
  const Tensor addend = Tensor::zeros({4, 5}, DType::F32);
  EXPECT_THROW(ops::matmul(a, false, b, true, out, 1.0f, 0.0f, addend), Error);  // beta 0 would ignore it
  EXPECT_THROW(ops::matmul(a, false, b, true, out, 1.0f, 1.0f, Tensor::zeros({5, 4}, DType::F32)), Error);
  EXPECT_THROW(ops::matmul(a, false, b, true, out, 1.0f, 1.0f, Tensor::zeros({4, 5}, DType::BF16)), Error);
  EXPECT_THROW(ops::matmul(a, false, b, true, out, 1.0f, 1.0f, out), Error);  // the addend is not out
  EXPECT_NO_THROW(ops::matmul(a, false, b, true, out, 1.0f, 1.0f, addend));
}

TEST(OpsGemm, CudaTensorsWithoutCudaKernelsAreAClearError) {
  // Host memory labelled as a CUDA device: enough to exercise the routing without a GPU.
  std::vector<float> host(12, 0.0f);
  Tensor a = Tensor::from_blob(host.data(), {2, 2}, DType::F32, Device::cuda(0));
  Tensor b = Tensor::from_blob(host.data() + 4, {2, 2}, DType::F32, Device::cuda(0));
  Tensor out = Tensor::from_blob(host.data() + 8, {2, 2}, DType::F32, Device::cuda(0));
  Tensor cpu_out = Tensor::zeros({2, 2}, DType::F32);
  EXPECT_THROW(ops::matmul(a, false, b, false, cpu_out), Error);  // mixed devices
#ifndef VEOMNI_WITH_CUDA
  EXPECT_THROW(ops::matmul(a, false, b, false, out), Error);
#endif
}

namespace {

// Rows of group g: x_g @ op(w[g]), w [G, N, K] when trans_w else [G, K, N].
Doubles naive_grouped(const Tensor& x, const Tensor& w, bool trans_w, const std::vector<int64_t>& sizes) {
  const int64_t k = x.dim(1), n = w.dim(trans_w ? 1 : 2);
  const Doubles xd = to_doubles(x), wd = to_doubles(w);
  Doubles out(static_cast<size_t>(x.dim(0) * n), 0.0);
  int64_t row = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    const double* wg = wd.data() + static_cast<int64_t>(g) * n * k;
    for (int64_t r = row; r < row + sizes[g]; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0.0;
        for (int64_t p = 0; p < k; ++p) s += xd[static_cast<size_t>(r * k + p)] * wg[trans_w ? j * k + p : p * n + j];
        out[static_cast<size_t>(r * n + j)] = s;
      }
    row += sizes[g];
  }
  return out;
}

int64_t total(const std::vector<int64_t>& sizes) {
  int64_t t = 0;
  for (int64_t s : sizes) t += s;
  return t;
}

}  // namespace

TEST(OpsGemm, GroupedMatmulMatchesPerGroupProducts) {
  std::mt19937 rng(4);
  const std::vector<int64_t> sizes = {0, 5, 1, 17, 0, 70};
  const int64_t t = total(sizes), k = 19, n = 11, g = static_cast<int64_t>(sizes.size());
  const Tensor x = random_f32({t, k}, rng);
  for (bool trans_w : {true, false}) {
    const Tensor w = trans_w ? random_f32({g, n, k}, rng) : random_f32({g, k, n}, rng);
    Tensor out = Tensor::empty({t, n}, DType::F32);
    ops::grouped_matmul(x, w, trans_w, sizes, out);
    const Doubles want = naive_grouped(x, w, trans_w, sizes);
    EXPECT_TRUE(all_close(out, want, 1e-5, 1e-5)) << "trans_w " << trans_w;
  }
}

TEST(OpsGemm, GroupedWeightGradIsTheGradientOfGroupedMatmul) {
  std::mt19937 rng(5);
  const std::vector<int64_t> sizes = {3, 0, 9, 1};
  const int64_t t = total(sizes), k = 6, n = 5, g = 4;
  Tensor x = random_f32({t, k}, rng);
  Tensor w = random_f32({g, n, k}, rng);
  const Tensor proj = random_f32({t, n}, rng);  // the loss is <proj, grouped_matmul(x, w)>
  auto loss = [&] {
    Tensor out = Tensor::empty({t, n}, DType::F32);
    ops::grouped_matmul(x, w, true, sizes, out);
    return project(out, proj);
  };
  // dW = dy^T x per group; an expert with no rows gets zeros, or keeps its value when accumulating.
  Tensor dw = Tensor::full<float>({g, n, k}, 7.0f);
  ops::grouped_matmul_weight_grad(proj, x, sizes, dw, false);
  expect_gradient("dw", w, dw, loss);
  for (int64_t i = n * k; i < 2 * n * k; ++i) EXPECT_EQ(dw.data<float>()[i], 0.0f);
  Tensor acc = Tensor::full<float>({g, n, k}, 1.0f);
  ops::grouped_matmul_weight_grad(proj, x, sizes, acc, true);
  for (int64_t i = 0; i < g * n * k; ++i) ASSERT_NEAR(acc.data<float>()[i], dw.data<float>()[i] + 1.0f, 1e-5);
  // dx = dy w_g for trans_w = true is grouped_matmul with trans_w = false on the same weights.
  Tensor dx = Tensor::empty({t, k}, DType::F32);
  ops::grouped_matmul(proj, w, false, sizes, dx);
  expect_gradient("dx", x, dx, loss);
}

TEST(OpsGemm, GroupedMatmulRejectsBadGroups) {
  Tensor x = Tensor::zeros({5, 3}, DType::F32);
  Tensor w = Tensor::zeros({2, 4, 3}, DType::F32);
  Tensor out = Tensor::zeros({5, 4}, DType::F32);
  EXPECT_THROW(ops::grouped_matmul(x, w, true, {2, 2}, out), Error);     // sums to 4, not 5
  EXPECT_THROW(ops::grouped_matmul(x, w, true, {6, -1}, out), Error);    // negative
  EXPECT_THROW(ops::grouped_matmul(x, w, true, {1, 1, 3}, out), Error);  // 3 sizes for 2 groups
  EXPECT_THROW(ops::grouped_matmul(x, w, false, {2, 3}, out), Error);    // w is [G, N, K], not [G, K, N]
  Tensor dw = Tensor::zeros({2, 4, 3}, DType::F32);
  EXPECT_THROW(ops::grouped_matmul_weight_grad(out, x, {5}, dw, false), Error);
  EXPECT_NO_THROW(ops::grouped_matmul(x, w, true, {2, 3}, out));
  EXPECT_NO_THROW(ops::grouped_matmul_weight_grad(out, x, {2, 3}, dw, false));
}
