// Unit tests of core: dtype conversions, tensor views and copies, error types.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

using namespace veomni;

TEST(DType, NamesRoundTrip) {
  for (DType d : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64, DType::U8, DType::Bool})
    EXPECT_EQ(dtype_from_name(dtype_name(d)), d);
  EXPECT_EQ(dtype_from_name("bfloat16"), DType::BF16);
  EXPECT_THROW(dtype_from_name("complex64"), InputError);
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(-3.5f)), -3.5f);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
}

TEST(DType, F16RoundTrip) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 0.00006103515625f, 1e-7f})
    EXPECT_NEAR(f16_to_float(float_to_f16(v)), v, std::fabs(v) * 1e-3 + 6e-8) << v;
  EXPECT_TRUE(std::isinf(f16_to_float(float_to_f16(1e6f))));
}

TEST(Tensor, ViewSliceSelectShareStorage) {
  Tensor t = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {3, 2});
  EXPECT_EQ(t.describe(), "f32[3, 2] cpu");
  Tensor v = t.view({2, -1});
  EXPECT_EQ(v.shape(), (Shape{2, 3}));
  Tensor s = t.slice(1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  EXPECT_EQ(s.data<float>()[0], 2.0f);
  s.data<float>()[0] = 42.0f;
  EXPECT_EQ(t.data<float>()[2], 42.0f);
  Tensor r = t.select(2);
  EXPECT_EQ(r.shape(), (Shape{2}));
  EXPECT_EQ(r.data<float>()[1], 5.0f);
  EXPECT_THROW(t.view({4, 2}), Error);
  EXPECT_THROW(t.slice(2, 4), Error);
  EXPECT_THROW(t.data<int32_t>(), Error);
}

// Consecutive row blocks of one buffer join into one view of it; a gap, another order, another buffer, another dtype or
// other trailing dims do not.
TEST(Tensor, JoinRowsViewsConsecutiveRowBlocksOfOneBuffer) {
  Tensor buffer = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {5, 2});
  const Tensor joined = Tensor::join_rows({buffer.slice(0, 1), buffer.slice(1, 3), buffer.slice(3, 4)});
  ASSERT_TRUE(joined.defined());
  EXPECT_EQ(joined.shape(), (Shape{4, 2}));
  EXPECT_EQ(joined.raw_data(), buffer.raw_data());
  buffer.data<float>()[7] = 42.0f;
  EXPECT_EQ(joined.data<float>()[7], 42.0f);
  EXPECT_TRUE(Tensor::join_rows({buffer.slice(2, 5)}).defined());

  EXPECT_FALSE(Tensor::join_rows({buffer.slice(0, 1), buffer.slice(2, 3)}).defined());  // a gap
  EXPECT_FALSE(Tensor::join_rows({buffer.slice(1, 2), buffer.slice(0, 1)}).defined());  // out of order
  EXPECT_FALSE(Tensor::join_rows({buffer.slice(0, 1), buffer.clone().slice(1, 2)}).defined());
  EXPECT_FALSE(Tensor::join_rows({buffer.slice(0, 1), buffer.slice(1, 3).view({4})}).defined());
  Tensor bytes = Tensor::zeros({4}, DType::F32);
  EXPECT_FALSE(Tensor::join_rows({bytes.slice(0, 2), bytes.view({2, 2}).slice(1, 2)}).defined());  // [2] then [1, 2]
  EXPECT_FALSE(Tensor::join_rows({}).defined());
  EXPECT_FALSE(Tensor::join_rows({Tensor(), buffer}).defined());
}

TEST(Tensor, CloneIsDeepAndToDtypeConverts) {
  Tensor t = Tensor::from_vector<float>({1.5f, -2.0f}, {2});
  Tensor c = t.clone();
  c.data<float>()[0] = 0;
  EXPECT_EQ(t.data<float>()[0], 1.5f);
  Tensor b = t.to_dtype(DType::BF16);
  EXPECT_EQ(b.item_as_double(0), 1.5);
  Tensor i = t.to_dtype(DType::I64);
  EXPECT_EQ(i.data<int64_t>()[1], -2);
  Tensor z = Tensor::zeros({4}, DType::I32);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(z.data<int32_t>()[k], 0);
}

// The floating conversions' fast loop gives what the generic one gives (each element through double): every bf16 and
// f16 bit pattern, and f32 values at bf16/f16 rounding ties, denormals, overflow, Inf and NaN, into each other type.
TEST(Tensor, FloatConversionsMatchTheElementwiseDefinition) {
  std::vector<Tensor> sources;
  for (DType half : {DType::BF16, DType::F16}) {
    Tensor t = Tensor::empty({65536}, half);
    for (int64_t i = 0; i < 65536; ++i) static_cast<uint16_t*>(t.raw_data())[i] = static_cast<uint16_t>(i);
    sources.push_back(t);
  }
  sources.push_back(Tensor::from_vector<float>({0.0f, -0.0f, 1.0f + std::ldexp(1.0f, -8), 1.0f + std::ldexp(1.0f, -11),
                                                1e-40f, -1e-45f, 65520.0f, 3.4e38f, INFINITY, -INFINITY, NAN, 0.1f},
                                               {12}));
  const auto want_bits = [](const Tensor& src, DType to, int64_t i) -> uint32_t {
    const float v = static_cast<float>(src.item_as_double(i));
    if (to == DType::F32) {
      uint32_t u;
      std::memcpy(&u, &v, 4);
      return u;
    }
    return to == DType::BF16 ? float_to_bf16(v).bits : float_to_f16(v).bits;
  };
  for (const Tensor& src : sources)
    for (DType to : {DType::F32, DType::BF16, DType::F16}) {
      SCOPED_TRACE(std::string(dtype_name(src.dtype())) + " -> " + dtype_name(to));
      const Tensor got = src.to_dtype(to);
      int64_t wrong = 0;
      for (int64_t i = 0; i < src.numel(); ++i) {
        const double value = got.item_as_double(i);
        if (std::isnan(src.item_as_double(i))) {
          wrong += std::isnan(value) ? 0 : 1;  // a NaN stays a NaN (its payload may be quietened)
          continue;
        }
        uint32_t bits = 0;
        std::memcpy(&bits, static_cast<const char*>(got.raw_data()) + i * dtype_size(to), dtype_size(to));
        wrong += bits == want_bits(src, to, i) ? 0 : 1;
      }
      EXPECT_EQ(wrong, 0);
    }
  Tensor small = Tensor::empty({3}, DType::BF16);
  EXPECT_THROW(small.convert_from(Tensor::zeros({4}, DType::F32)), Error);
}

TEST(Tensor, CudaWithoutBackendIsAClearError) {
  // No CUDA allocator is registered in a CPU-only process: asking for device memory must say so, not crash.
  EXPECT_THROW(Tensor::empty({2}, DType::F32, Device::cuda(0)), Error);
}

TEST(Tensor, ShapesBeyondSixtyFourBitsAreRefusedBeforeAllocating) {
  // 2^40 x 2^40 elements overflow int64; 2^31 x 2^31 elements of 4 bytes overflow the byte count (2^64).
  EXPECT_THROW(Tensor::empty({int64_t{1} << 40, int64_t{1} << 40}, DType::F32), Error);
  EXPECT_THROW(Tensor::empty({int64_t{1} << 31, int64_t{1} << 31}, DType::F32), Error);
  EXPECT_THROW(Tensor::empty({-1, 4}, DType::F32), Error);
}
