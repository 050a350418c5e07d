// Tests of the rotary tables (1-D and interleaved M-RoPE, i64 and f32 positions) and of rope_apply and its transpose.
#include <cmath>

#include "kernels/ops.h"
#include "test_ops_util.h"

using namespace veomni;
using namespace veomni::test_ops;

namespace {

// Stream of frequency j under interleaved M-RoPE (REFERENCE.md): H if j%3==1 && j<3*s[1], W if j%3==2 && j<3*s[2].
int stream_of(int64_t j, const std::vector<int64_t>& section) {
  if (j % 3 == 1 && j < 3 * section[1]) return 1;
  if (j % 3 == 2 && j < 3 * section[2]) return 2;
  return 0;
}

// cos/sin tables in exact double arithmetic: angle = pos * theta^(-2j/D), emb = cat(freqs, freqs).
void naive_tables(const Tensor& positions, int64_t d, double theta, const std::vector<int64_t>& section, Doubles& cos,
                  Doubles& sin) {
  const int64_t s = positions.dim(-1);
  cos.assign(static_cast<size_t>(s * d), 0.0);
  sin = cos;
  for (int64_t t = 0; t < s; ++t)
    for (int64_t j = 0; j < d / 2; ++j) {
      const int stream = positions.ndim() == 2 ? stream_of(j, section) : 0;
      const double pos = positions.item_as_double(stream * s + t);
      const double angle = pos * std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(d));
      for (int64_t half : {int64_t{0}, d / 2}) {
        cos[static_cast<size_t>(t * d + j + half)] = std::cos(angle);
        sin[static_cast<size_t>(t * d + j + half)] = std::sin(angle);
      }
    }
}

void tables(const Tensor& positions, int64_t d, double theta, const std::vector<int64_t>& section, Tensor& cos,
            Tensor& sin) {
  cos = Tensor::empty({positions.dim(-1), d}, DType::F32);
  sin = Tensor::empty({positions.dim(-1), d}, DType::F32);
  ops::rope_tables(positions, d, theta, section, cos, sin);
}

}  // namespace

TEST(OpsRope, OneDimensionalTablesMatchExactAngles) {
  const Tensor pos = Tensor::from_vector<int64_t>({0, 1, 2, 7, 31, 40, 3}, {7});
  for (int64_t d : {2, 16, 128}) {
    Tensor cos, sin;
    tables(pos, d, 1e6, {}, cos, sin);
    Doubles want_cos, want_sin;
    naive_tables(pos, d, 1e6, {}, want_cos, want_sin);
    // The angle is an fp32 product as in HF: about 1.5e-7 relative, so up to 6e-6 absolute at position 40.
    EXPECT_TRUE(all_close(cos, want_cos, 0.0, 1e-5)) << "D " << d;
    EXPECT_TRUE(all_close(sin, want_sin, 0.0, 1e-5)) << "D " << d;
  }
}

TEST(OpsRope, LargePositionsFollowHfFp32Arithmetic) {
  // HF: inv_freq = 1 / theta ** (arange(0, D, 2).float() / D) in fp32, freqs = position.float() * inv_freq in fp32;
  // at position 1e5 that rounding moves the angle by ~1e-3, so the tables must reproduce it.
  const int64_t d = 64;
  const Tensor pos = Tensor::from_vector<int64_t>({100000, 65535, 123457}, {3});
  Tensor cos, sin;
  tables(pos, d, 1e6, {}, cos, sin);
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t j = 0; j < d / 2; ++j) {
      const float exponent = static_cast<float>(2 * j) / static_cast<float>(d);
      const float inv = 1.0f / static_cast<float>(std::pow(1e6, static_cast<double>(exponent)));
      const float angle = static_cast<float>(pos.data<int64_t>()[t]) * inv;
      ASSERT_NEAR(cos.data<float>()[t * d + j], std::cos(static_cast<double>(angle)), 1e-7) << t << "," << j;
      ASSERT_NEAR(sin.data<float>()[t * d + j + d / 2], std::sin(static_cast<double>(angle)), 1e-7) << t << "," << j;
    }
}

TEST(OpsRope, InterleavedMropeTakesEachFrequencyFromItsStream) {
  std::mt19937 rng(31);
  std::uniform_int_distribution<int64_t> dist(0, 30);
  const int64_t s = 9;
  std::vector<int64_t> p(3 * s);
  for (auto& v : p) v = dist(rng);
  const Tensor pos = Tensor::from_vector(p, {3, s});
  const std::vector<std::vector<int64_t>> sections = {{2, 1, 1}, {3, 3, 2}, {24, 20, 20}};
  const int64_t dims[] = {16, 16, 128};
  for (size_t c = 0; c < sections.size(); ++c) {
    Tensor cos, sin;
    tables(pos, dims[c], 1e4, sections[c], cos, sin);
    Doubles want_cos, want_sin;
    naive_tables(pos, dims[c], 1e4, sections[c], want_cos, want_sin);
    EXPECT_TRUE(all_close(cos, want_cos, 0.0, 1e-5)) << "case " << c;
    EXPECT_TRUE(all_close(sin, want_sin, 0.0, 1e-5)) << "case " << c;
  }
  // Text tokens have equal streams: M-RoPE then equals 1-D RoPE exactly.
  const Tensor flat = Tensor::from_vector<int64_t>({4, 5, 6}, {3});
  const Tensor same = Tensor::from_vector<int64_t>({4, 5, 6, 4, 5, 6, 4, 5, 6}, {3, 3});
  Tensor c1, s1, c3, s3;
  tables(flat, 128, 1e6, {}, c1, s1);
  tables(same, 128, 1e6, {24, 20, 20}, c3, s3);
  EXPECT_TRUE(bitwise_equal(c1, c3));
  EXPECT_TRUE(bitwise_equal(s1, s3));
}

TEST(OpsRope, FloatPositionsOfQwen3Omni) {
  const Tensor pos = Tensor::from_vector<float>({0.0f, 0.5f, 13.0f, 26.5f, 2.25f, 2.25f, 0.0f, 1.0f, 3.0f}, {3, 3});
  Tensor cos, sin;
  tables(pos, 32, 1e6, {4, 6, 6}, cos, sin);
  Doubles want_cos, want_sin;
  naive_tables(pos, 32, 1e6, {4, 6, 6}, want_cos, want_sin);
  EXPECT_TRUE(all_close(cos, want_cos, 0.0, 1e-5));
  EXPECT_TRUE(all_close(sin, want_sin, 0.0, 1e-5));
}

TEST(OpsRope, ApplyRotatesHalvesAndInverseIsItsTranspose) {
  std::mt19937 rng(32);
  const int64_t s = 5, h = 3, d = 10, half = d / 2;
  // Arbitrary tables (not from angles) so that the transpose is checked as a transpose, not as a rotation by -theta.
  const Tensor cos = random_f32({s, d}, rng), sin = random_f32({s, d}, rng);
  const Tensor x = random_f32({s, h, d}, rng), y = random_f32({s, h, d}, rng);
  Tensor rx = x.clone();
  ops::rope_apply(rx, cos, sin, false);
  Doubles want(static_cast<size_t>(x.numel()));
  for (int64_t t = 0; t < s; ++t)
    for (int64_t head = 0; head < h; ++head)
      for (int64_t i = 0; i < d; ++i) {
        const int64_t row = (t * h + head) * d;
        const double rot = i < half ? -x.item_as_double(row + i + half) : x.item_as_double(row + i - half);
        want[static_cast<size_t>(row + i)] =
            x.item_as_double(row + i) * cos.item_as_double(t * d + i) + rot * sin.item_as_double(t * d + i);
      }
  EXPECT_TRUE(all_close(rx, want, 1e-6, 1e-6));
  // <R x, y> = <x, R^T y>.
  Tensor rty = y.clone();
  ops::rope_apply(rty, cos, sin, true);
  EXPECT_NEAR(project(rx, y), project(x, rty), 1e-5 * std::fabs(project(rx, y)) + 1e-5);
}

TEST(OpsRope, InverseUndoesTheRotationAndIsTheGradient) {
  std::mt19937 rng(33);
  const Tensor pos = Tensor::from_vector<int64_t>({0, 3, 8, 100}, {4});
  Tensor cos, sin;
  tables(pos, 8, 1e4, {}, cos, sin);
  Tensor x = random_f32({4, 2, 8}, rng);
  Tensor back = x.clone();
  ops::rope_apply(back, cos, sin, false);
  ops::rope_apply(back, cos, sin, true);
  EXPECT_TRUE(all_close(back, to_doubles(x), 1e-6, 1e-6));
  const Tensor proj = random_f32({4, 2, 8}, rng);
  auto loss = [&] {
    Tensor y = x.clone();
    ops::rope_apply(y, cos, sin, false);
    return project(y, proj);
  };
  Tensor grad = proj.clone();
  ops::rope_apply(grad, cos, sin, true);
  expect_gradient("dx", x, grad, loss);
}

TEST(OpsRope, RejectsBadArguments) {
  Tensor cos = Tensor::zeros({3, 8}, DType::F32), sin = Tensor::zeros({3, 8}, DType::F32);
  const Tensor pos3 = Tensor::zeros({3, 3}, DType::I64);
  EXPECT_THROW(ops::rope_tables(pos3, 8, 1e6, {}, cos, sin), Error);  // [3, S] needs mrope_section
  EXPECT_THROW(ops::rope_tables(Tensor::zeros({2, 3}, DType::I64), 8, 1e6, {1, 1, 2}, cos, sin), Error);
  EXPECT_THROW(ops::rope_tables(Tensor::zeros({3}, DType::I32), 8, 1e6, {}, cos, sin), Error);
  EXPECT_THROW(ops::rope_tables(Tensor::zeros({3}, DType::I64), 7, 1e6, {}, cos, sin), Error);
  EXPECT_THROW(ops::rope_tables(Tensor::zeros({4}, DType::I64), 8, 1e6, {}, cos, sin), Error);
  EXPECT_NO_THROW(ops::rope_tables(pos3, 8, 1e6, {2, 1, 1}, cos, sin));
  Tensor x = Tensor::zeros({3, 2, 8}, DType::F32);
  EXPECT_THROW(ops::rope_apply(x, Tensor::zeros({3, 6}, DType::F32), sin, false), Error);
  Tensor flat = Tensor::zeros({3, 16}, DType::F32);
  EXPECT_THROW(ops::rope_apply(flat, cos, sin, false), Error);
  EXPECT_NO_THROW(ops::rope_apply(x, cos, sin, true));
}
