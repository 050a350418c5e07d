// The CPU FP8 ops (kernels/fp8_ops.h): E4M3 rounding of known values (ties to even, saturation, subnormals, signed
// zeros, NaN), the rowwise and columnwise scales, and the scaled TN GEMM against the f32 product of the dequantized
// operands.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "kernels/fp8_ops.h"

using namespace veomni;
using ops::fp8_e4m3_from_float;
using ops::fp8_e4m3_to_float;

namespace {

Tensor random_matrix(int64_t rows, int64_t cols, uint32_t seed, float lo = -3.0f, float hi = 3.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(static_cast<size_t>(rows * cols));
  for (float& v : values) v = dist(rng);
  return Tensor::from_vector(values, {rows, cols});
}

TEST(Fp8E4M3, ExactValuesEncode) {
  EXPECT_EQ(fp8_e4m3_from_float(0.0f), 0x00);
  EXPECT_EQ(fp8_e4m3_from_float(-0.0f), 0x80);
  EXPECT_EQ(fp8_e4m3_from_float(1.0f), 0x38);
  EXPECT_EQ(fp8_e4m3_from_float(-2.0f), 0xC0);
  EXPECT_EQ(fp8_e4m3_from_float(240.0f), 0x77);    // 1.875 * 2^7
  EXPECT_EQ(fp8_e4m3_from_float(448.0f), 0x7E);    // the largest finite value
  EXPECT_EQ(fp8_e4m3_from_float(0x1p-6f), 0x08);   // the smallest normal
  EXPECT_EQ(fp8_e4m3_from_float(0x1p-9f), 0x01);   // the smallest subnormal
  EXPECT_EQ(fp8_e4m3_from_float(7 * 0x1p-9f), 0x07);  // the largest subnormal
}

TEST(Fp8E4M3, RoundsToNearestEven) {
  EXPECT_EQ(fp8_e4m3_from_float(0.1f), 0x1D);              // 1.6 * 2^-4 -> 1.625 * 2^-4
  EXPECT_EQ(fp8_e4m3_from_float(1.0625f), 0x38);           // tie of 1.0 and 1.125: the even 1.0
  EXPECT_EQ(fp8_e4m3_from_float(1.1875f), 0x3A);           // tie of 1.125 and 1.25: the even 1.25
  EXPECT_EQ(fp8_e4m3_from_float(std::nextafter(1.0625f, 2.0f)), 0x39);  // just above the tie: up
  EXPECT_EQ(fp8_e4m3_from_float(std::nextafter(1.1875f, 0.0f)), 0x39);  // just below the tie: down
  EXPECT_EQ(fp8_e4m3_from_float(1.9375f), 0x40);           // tie of 1.875 and 2.0: 2.0, carrying into the exponent
  EXPECT_EQ(fp8_e4m3_from_float(-1.0625f), 0xB8);          // ties are symmetric
  EXPECT_EQ(fp8_e4m3_from_float(400.0f), 0x7C);            // tie of 384 and 416 at the top exponent: 384
}

TEST(Fp8E4M3, SaturatesToTheLargestFinite) {
  EXPECT_EQ(fp8_e4m3_from_float(449.0f), 0x7E);
  EXPECT_EQ(fp8_e4m3_from_float(464.0f), 0x7E);  // the tie of 448 and 480 (not representable)
  EXPECT_EQ(fp8_e4m3_from_float(1e9f), 0x7E);
  EXPECT_EQ(fp8_e4m3_from_float(-1e9f), 0xFE);
  EXPECT_EQ(fp8_e4m3_from_float(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(fp8_e4m3_from_float(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(fp8_e4m3_from_float(std::nanf("")), 0x7F);
}

TEST(Fp8E4M3, SubnormalsRoundToEvenSteps) {
  EXPECT_EQ(fp8_e4m3_from_float(0x1p-10f), 0x00);       // tie of 0 and 2^-9: zero
  EXPECT_EQ(fp8_e4m3_from_float(-0x1p-10f), 0x80);      // keeping the sign
  EXPECT_EQ(fp8_e4m3_from_float(3 * 0x1p-10f), 0x02);   // tie of 1 and 2 steps: 2
  EXPECT_EQ(fp8_e4m3_from_float(5 * 0x1p-10f), 0x02);   // tie of 2 and 3 steps: 2
  EXPECT_EQ(fp8_e4m3_from_float(15 * 0x1p-10f), 0x08);  // tie of 7 steps and the smallest normal: the normal
  EXPECT_EQ(fp8_e4m3_from_float(0x1p-12f), 0x00);       // underflow
  EXPECT_FLOAT_EQ(fp8_e4m3_to_float(0x03), 3 * 0x1p-9f);
}

TEST(Fp8E4M3, EveryCodeRoundTrips) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(static_cast<uint8_t>(code))));
      continue;
    }
    EXPECT_EQ(fp8_e4m3_from_float(fp8_e4m3_to_float(static_cast<uint8_t>(code))), code) << code;
  }
  EXPECT_EQ(fp8_e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0xB8), -1.0f);
}

TEST(Fp8Quantize, RowsScaleByTheirAmax) {
  const Tensor x = Tensor::from_vector<float>({1.0f, -4.0f, 0.5f, 2.0f,  //
                                               0.0f, 0.0f, 0.0f, 0.0f,  //
                                               3e-3f, -1e-4f, 7e-3f, 0.0f},
                                              {3, 4});
  Tensor q = Tensor::empty({3, 4}, DType::U8);
  Tensor scales = Tensor::empty({3}, DType::F32);
  ops::quantize_fp8_rows(x, q, scales);
  const float* s = scales.data<float>();
  EXPECT_EQ(s[0], 4.0f / 448.0f);
  EXPECT_EQ(s[1], 1.0f);  // a row of zeros
  EXPECT_EQ(s[2], 7e-3f / 448.0f);
  const uint8_t* b = q.data<uint8_t>();
  EXPECT_EQ(b[1], 0xFE);  // the amax element is -448
  EXPECT_EQ(b[10], 0x7E);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(b[i], 0x00);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 4; ++c) {
      const float value = x.data<float>()[r * 4 + c];
      EXPECT_EQ(b[r * 4 + c], fp8_e4m3_from_float(value / s[r]));
      // E4M3 keeps 3 mantissa bits: a normal value comes back within 2^-4 of itself.
      EXPECT_NEAR(fp8_e4m3_to_float(b[r * 4 + c]) * s[r], value, std::fabs(value) * 0x1p-4f + s[r] * 0x1p-9f);
    }
}

TEST(Fp8Quantize, ColumnsTransposedAreTheRowsOfTheTranspose) {
  const int64_t rows = 7, cols = 5;
  const Tensor x = random_matrix(rows, cols, 3);
  std::vector<float> transposed(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) transposed[static_cast<size_t>(c * rows + r)] = x.data<float>()[r * cols + c];
  Tensor want_q = Tensor::empty({cols, rows}, DType::U8), want_s = Tensor::empty({cols}, DType::F32);
  ops::quantize_fp8_rows(Tensor::from_vector(transposed, {cols, rows}), want_q, want_s);
  Tensor q = Tensor::empty({cols, rows}, DType::U8), s = Tensor::empty({cols}, DType::F32);
  ops::quantize_fp8_cols_transposed(x, q, s);
  EXPECT_EQ(std::memcmp(q.raw_data(), want_q.raw_data(), q.nbytes()), 0);
  EXPECT_EQ(std::memcmp(s.raw_data(), want_s.raw_data(), s.nbytes()), 0);
  float amax0 = 0.0f;
  for (int64_t r = 0; r < rows; ++r) amax0 = std::max(amax0, std::fabs(x.data<float>()[r * cols]));
  EXPECT_EQ(s.data<float>()[0], amax0 / 448.0f);
}

TEST(Fp8Matmul, EqualsTheProductOfTheDequantizedOperands) {
  const int64_t m = 6, n = 5, k = 32;
  Tensor qa = Tensor::empty({m, k}, DType::U8), sa = Tensor::empty({m}, DType::F32);
  Tensor qb = Tensor::empty({n, k}, DType::U8), sb = Tensor::empty({n}, DType::F32);
  const Tensor a = random_matrix(m, k, 5), b = random_matrix(n, k, 6, -0.1f, 0.1f);
  ops::quantize_fp8_rows(a, qa, sa);
  ops::quantize_fp8_rows(b, qb, sb);
  Tensor out = Tensor::empty({m, n}, DType::F32);
  ops::matmul_fp8_tn(qa, sa, qb, sb, out);
  Tensor accumulated = Tensor::full<float>({m, n}, 0.25f);
  ops::matmul_fp8_tn(qa, sa, qb, sb, accumulated, 1.0f);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0.0, exact = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        want += static_cast<double>(fp8_e4m3_to_float(qa.data<uint8_t>()[i * k + p]) * sa.data<float>()[i]) *
                (fp8_e4m3_to_float(qb.data<uint8_t>()[j * k + p]) * sb.data<float>()[j]);
        exact += static_cast<double>(a.data<float>()[i * k + p]) * b.data<float>()[j * k + p];
      }
      const float got = out.data<float>()[i * n + j];
      EXPECT_NEAR(got, want, 1e-5 * (std::fabs(want) + 1e-3)) << i << "," << j;
      EXPECT_NEAR(accumulated.data<float>()[i * n + j], want + 0.25, 1e-5 * (std::fabs(want) + 1.0));
      // ... and near the unquantized product: two 2^-4 relative roundings per term.
      EXPECT_NEAR(got, exact, 0.15 * 0.3 * 3.0 * std::sqrt(static_cast<double>(k)));
    }
}

TEST(Fp8Ops, CallsAreChecked) {
  Tensor x = random_matrix(4, 8, 1);
  Tensor q = Tensor::empty({4, 8}, DType::U8), s = Tensor::empty({4}, DType::F32);
  Tensor wrong_q = Tensor::empty({4, 8}, DType::I32), wrong_s = Tensor::empty({8}, DType::F32);
  EXPECT_THROW(ops::quantize_fp8_rows(x, wrong_q, s), Error);
  EXPECT_THROW(ops::quantize_fp8_rows(x, q, wrong_s), Error);
  EXPECT_THROW(ops::quantize_fp8_cols_transposed(x, q, s), Error);  // qt must be [8, 4]
  Tensor out = Tensor::empty({4, 3}, DType::F32);
  EXPECT_THROW(ops::matmul_fp8_tn(q, s, q, s, out), Error);  // out must be [4, 4]
  EXPECT_THROW(ops::matmul_fp8_tn(x, s, q, s, out), Error);  // a must be u8
}

}  // namespace
