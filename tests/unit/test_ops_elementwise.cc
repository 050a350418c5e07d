// Tests of reductions (double accumulation, thread-count independent), in-place elementwise ops and dtype casts.
#include <cmath>

#include "kernels/ops.h"
#include "test_ops_util.h"

using namespace veomni;
using namespace veomni::test_ops;

TEST(OpsElementwise, SumsAccumulateInDoubleIndependentOfThreads) {
  std::mt19937 rng(91);
  const int64_t n = 100003;
  const Tensor x = random_f32({n}, rng, -1.0f, 1.0f);
  double want = 0.0, want_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = x.data<float>()[i];
    want += v;
    want_sq += v * v;
  }
  double s1 = 0, s2 = 0, q1 = 0, q2 = 0;
  with_threads(1, [&] { s1 = ops::sum(x), q1 = ops::sum_squares(x); });
  with_threads(2, [&] { s2 = ops::sum(x), q2 = ops::sum_squares(x); });
  EXPECT_NEAR(s1, want, 1e-10 * n);
  EXPECT_NEAR(q1, want_sq, 1e-12 * want_sq);
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(q1, q2);
  // 2^24 + 1 ones is not representable in float; a double accumulator counts them exactly.
  const Tensor ones = Tensor::full<float>({(1 << 24) + 3}, 1.0f);
  EXPECT_EQ(ops::sum(ones), static_cast<double>((1 << 24) + 3));
  EXPECT_EQ(ops::sum(Tensor::empty({0}, DType::F32)), 0.0);
}

TEST(OpsElementwise, AddScaleFill) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3}, {3});
  const Tensor b = Tensor::from_vector<float>({10, 20, 30}, {1, 3});  // shapes may differ, sizes may not
  ops::add_(a, b, -0.5f);
  EXPECT_EQ(a.to_float_vector(), (std::vector<float>{-4, -8, -12}));
  ops::add_(a, b);
  EXPECT_EQ(a.to_float_vector(), (std::vector<float>{6, 12, 18}));
  ops::scale_(a, 0.5f);
  EXPECT_EQ(a.to_float_vector(), (std::vector<float>{3, 6, 9}));
  ops::fill_(a, -1.25f);
  EXPECT_EQ(a.to_float_vector(), (std::vector<float>{-1.25f, -1.25f, -1.25f}));
  std::mt19937 rng(92);
  Tensor big = random_f32({70001}, rng);
  const Tensor other = random_f32({70001}, rng);
  const Tensor before = big.clone();
  ops::add_(big, other, 3.0f);
  for (int64_t i = 0; i < big.numel(); i += 997)
    ASSERT_EQ(big.data<float>()[i], before.data<float>()[i] + 3.0f * other.data<float>()[i]);
}

TEST(OpsElementwise, CastBetweenFloatTypes) {
  const std::vector<float> values = {0.0f, 1.0f, -2.5f, 3.14159265f, 1e-3f, 65504.0f, 1e6f, -1e-7f};
  const int64_t n = static_cast<int64_t>(values.size());
  const Tensor f32 = Tensor::from_vector(values, {n});
  Tensor bf = Tensor::empty({n}, DType::BF16), h = Tensor::empty({n}, DType::F16);
  ops::cast(f32, bf);
  ops::cast(f32, h);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(bf.data<bf16>()[i].bits, float_to_bf16(values[static_cast<size_t>(i)]).bits) << i;
    EXPECT_EQ(h.data<f16>()[i].bits, float_to_f16(values[static_cast<size_t>(i)]).bits) << i;
  }
  Tensor back = Tensor::empty({n}, DType::F32), h_from_bf = Tensor::empty({n}, DType::F16);
  ops::cast(bf, back);
  ops::cast(bf, h_from_bf);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(back.data<float>()[i], bf16_to_float(bf.data<bf16>()[i])) << i;
    EXPECT_EQ(h_from_bf.data<f16>()[i].bits, float_to_f16(bf16_to_float(bf.data<bf16>()[i])).bits) << i;
  }
  Tensor copy = Tensor::empty({2, 4}, DType::F32);
  ops::cast(f32, copy);
  EXPECT_EQ(copy.to_float_vector(), values);
}

TEST(OpsElementwise, RejectsBadArguments) {
  Tensor a = Tensor::zeros({3}, DType::F32);
  EXPECT_THROW(ops::add_(a, Tensor::zeros({4}, DType::F32)), Error);
  EXPECT_THROW(ops::add_(a, Tensor::zeros({3}, DType::BF16)), Error);
  EXPECT_THROW(ops::add_(a, a), Error);  // use scale_
  Tensor ints = Tensor::zeros({3}, DType::I32);
  EXPECT_THROW(ops::sum(ints), Error);
  EXPECT_THROW(ops::fill_(ints, 1.0f), Error);
  EXPECT_THROW(ops::cast(a, ints), Error);
  Tensor bf = Tensor::zeros({4}, DType::BF16);
  EXPECT_THROW(ops::cast(a, bf), Error);
  Tensor undefined;
  EXPECT_THROW(ops::scale_(undefined, 2.0f), Error);
}
