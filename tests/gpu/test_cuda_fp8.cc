// GPU tests of the FP8 ops (kernels/fp8_ops.h): CUDA quantization bit-identical to the CPU reference (rows and the
// columnwise transpose, from f32 and from bf16, with rounding ties, subnormals and saturation in the data), the
// cuBLASLt rowwise-scaled GEMM against the CPU's, and the FP8 linear against the bf16 one.
#include <limits>

#include "gpu_test_util.h"
#include "kernels/fp8_ops.h"
#include "kernels/ops.h"
#include "model/layers/fp8_linear.h"

using namespace veomni;
using namespace veomni::gpu_test;

namespace {

class CudaFp8 : public CudaTest {};

// Random values over many binades, with the row's special cases planted: a large value (the amax), exact ties
// relative to it, values that land in E4M3's subnormal range, a zero and a negative zero.
Tensor spread_values(int64_t rows, int64_t cols, std::mt19937& rng) {
  Tensor t = random_f32({rows, cols}, rng);
  float* p = t.data<float>();
  std::uniform_int_distribution<int> binade(-14, 3);
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = std::ldexp(p[i], binade(rng));
  for (int64_t r = 0; r < rows && cols >= 6; ++r) {
    float* row = p + r * cols;
    row[0] = 16.0f;                    // amax: scale 16 / 448 = 1/28, so x / scale = 28 x
    row[1] = 1.0625f * 16.0f / 28.0f;  // near a tie after scaling
    row[2] = 0x1p-10f * 16.0f / 28.0f;  // about half the smallest subnormal after scaling
    row[3] = 0.0f;
    row[4] = -0.0f;
    row[5] = -16.0f;
  }
  return t;
}

void expect_rows_match_cpu(const Tensor& x_cpu, DType dtype) {
  SCOPED_TRACE(dtype_name(dtype));
  const Tensor x = representable(x_cpu, dtype);
  const int64_t rows = x.dim(0), cols = x.dim(1);
  Tensor want_q = Tensor::empty({rows, cols}, DType::U8), want_s = Tensor::empty({rows}, DType::F32);
  ops::quantize_fp8_rows(x, want_q, want_s);
  Tensor q = Tensor::empty({rows, cols}, DType::U8, gpu()), s = Tensor::empty({rows}, DType::F32, gpu());
  ops::quantize_fp8_rows(to_gpu(x, dtype), q, s);
  EXPECT_TRUE(bitwise_equal(s, want_s));
  EXPECT_TRUE(bitwise_equal(q, want_q));

  Tensor want_qt = Tensor::empty({cols, rows}, DType::U8), want_st = Tensor::empty({cols}, DType::F32);
  ops::quantize_fp8_cols_transposed(x, want_qt, want_st);
  Tensor qt = Tensor::empty({cols, rows}, DType::U8, gpu()), st = Tensor::empty({cols}, DType::F32, gpu());
  ops::quantize_fp8_cols_transposed(to_gpu(x, dtype), qt, st);
  EXPECT_TRUE(bitwise_equal(st, want_st));
  EXPECT_TRUE(bitwise_equal(qt, want_qt));
}

TEST_F(CudaFp8, QuantizeIsBitIdenticalToTheCpu) {
  std::mt19937 rng(17);
  for (const DType dtype : float_dtypes()) {
    expect_rows_match_cpu(spread_values(37, 300, rng), dtype);   // odd sizes: partial tiles and blocks
    expect_rows_match_cpu(spread_values(600, 96, rng), dtype);   // more rows than one column-amax block
    expect_rows_match_cpu(spread_values(5, 4104, rng), dtype);   // bf16 rows of 8k: several loads per lane
    expect_rows_match_cpu(Tensor::zeros({3, 40}, DType::F32), dtype);  // scale 1
  }
}

TEST_F(CudaFp8, QuantizeSaturatesAndKeepsNan) {
  // A NaN is left out of the amax (fmax) on both sides and quantizes to 0x7F; 4 columns take the general kernel,
  // 8 (in bf16) the one of 16-byte loads.
  for (const int64_t cols : {4, 8})
    for (const DType dtype : float_dtypes()) {
      SCOPED_TRACE(fmt::format("{} columns of {}", cols, dtype_name(dtype)));
      std::vector<float> row(static_cast<size_t>(cols), 0.25f);
      row[0] = 1.0f, row[1] = std::nanf(""), row[2] = -2.0f, row[3] = 0.5f;
      const Tensor x = Tensor::from_vector<float>(row, {1, cols});
      Tensor q = Tensor::empty({1, cols}, DType::U8, gpu()), s = Tensor::empty({1}, DType::F32, gpu());
      ops::quantize_fp8_rows(to_gpu(x, dtype), q, s);
      const Tensor host_q = q.to(Device::cpu());
      EXPECT_EQ(host_q.data<uint8_t>()[1], 0x7F);
      EXPECT_EQ(host_q.data<uint8_t>()[2], 0xFE);
      EXPECT_EQ(s.to(Device::cpu()).data<float>()[0], 2.0f / 448.0f);
    }
}

void check_gemm(int64_t m, int64_t n, int64_t k, DType out_dtype, float beta, std::mt19937& rng) {
  SCOPED_TRACE(fmt::format("m {} n {} k {} out {} beta {}", m, n, k, dtype_name(out_dtype), beta));
  const Tensor a = random_f32({m, k}, rng), b = random_f32({n, k}, rng, -0.05f, 0.05f);
  Tensor qa = Tensor::empty({m, k}, DType::U8), sa = Tensor::empty({m}, DType::F32);
  Tensor qb = Tensor::empty({n, k}, DType::U8), sb = Tensor::empty({n}, DType::F32);
  ops::quantize_fp8_rows(a, qa, sa);
  ops::quantize_fp8_rows(b, qb, sb);
  const Tensor out0 = representable(random_f32({m, n}, rng), out_dtype);
  Tensor want = out0.clone();
  ops::matmul_fp8_tn(qa, sa, qb, sb, want, beta);
  Tensor got = to_gpu(out0, out_dtype);
  ops::matmul_fp8_tn(qa.to(gpu()), sa.to(gpu()), qb.to(gpu()), sb.to(gpu()), got, beta);
  // The operands are exact on both sides: only the summation (Hopper's FP8 tensor cores accumulate in fewer bits than
  // f32 between promotions) and a bf16 output's rounding differ. A wrong or missing scale would be off by far more.
  EXPECT_TRUE(close_to(got, want, out_dtype == DType::BF16 ? kBf16Rtol : 2e-3));
}

TEST_F(CudaFp8, GemmMatchesTheCpu) {
  std::mt19937 rng(23);
  for (const DType out : float_dtypes())
    for (const float beta : {0.0f, 1.0f}) {
      check_gemm(64, 48, 96, out, beta, rng);
      check_gemm(272, 1024, 512, out, beta, rng);
    }
}

TEST_F(CudaFp8, GemmRejectsShapesCublasCannotTake) {
  Tensor q = Tensor::zeros({24, 32}, DType::U8, gpu()), s = Tensor::zeros({24}, DType::F32, gpu());
  Tensor out = Tensor::empty({24, 24}, DType::BF16, gpu());
  EXPECT_THROW(ops::matmul_fp8_tn(q, s, q, s, out), Error);
}

// The FP8 linear (forward and input gradient) against the bf16 GEMM of the same bf16 operands: within E4M3's
// relative rounding of both operands (2^-4 each), accumulated as a random walk.
TEST_F(CudaFp8, LinearFollowsTheBf16Gemm) {
  std::mt19937 rng(29);
  const int64_t tokens = 256, in = 512, out = 384;
  const Tensor x = to_gpu(random_f32({tokens, in}, rng), DType::BF16);
  const Tensor w = to_gpu(random_f32({out, in}, rng, -0.05f, 0.05f), DType::BF16);
  const Tensor dy = to_gpu(random_f32({tokens, out}, rng), DType::BF16);
  ASSERT_TRUE(fp8_linear_applies(x, w));
  ASSERT_TRUE(fp8_linear_applies(dy, w));
  EXPECT_FALSE(fp8_linear_applies(x.slice(0, tokens - 8), w));  // 248 tokens
  Tensor y_bf16 = Tensor::empty({tokens, out}, DType::BF16, gpu()), y_fp8 = y_bf16.clone();
  ops::matmul(x, false, w, true, y_bf16);
  fp8_linear_forward(x, w, y_fp8);
  EXPECT_TRUE(close_to(y_fp8, y_bf16, 0.1));
  EXPECT_FALSE(close_to(y_fp8, y_bf16, 1e-4));  // it did quantize
  Tensor dx_bf16 = Tensor::empty({tokens, in}, DType::BF16, gpu()), dx_fp8 = dx_bf16.clone();
  ops::matmul(dy, false, w, false, dx_bf16);
  fp8_linear_input_grad(dy, w, dx_fp8);
  EXPECT_TRUE(close_to(dx_fp8, dx_bf16, 0.1));
  EXPECT_FALSE(close_to(dx_fp8, dx_bf16, 1e-4));
}

}  // namespace
