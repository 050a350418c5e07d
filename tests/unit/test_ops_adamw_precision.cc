// Tests of adamw_step_multi's fused compute copy (the same bits as a step then a cast) and of its bf16 moments
// (anyprecision_adamw) against the rounding they define, element by element and in double.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/ops.h"
#include "test_ops_util.h"

using namespace veomni;
using namespace veomni::test_ops;

namespace {

constexpr double kLr = 3e-3, kBeta1 = 0.9, kBeta2 = 0.95, kEps = 1e-8;

// Slots of several sizes (one empty, one across parallel chunks) with moments of one dtype, an optional compute copy
// of another, and weight decay on every other slot.
struct Slots {
  std::vector<Tensor> p, g, m, v, c;
  std::vector<double> wd;

  Slots(std::mt19937& rng, DType moments, DType copy, const std::vector<int64_t>& sizes = {1, 0, 40000, 17}) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      const Shape shape{sizes[i]};
      p.push_back(random_f32(shape, rng));
      g.push_back(random_f32(shape, rng, -0.1f, 0.1f));
      m.push_back(random_f32(shape, rng, -0.01f, 0.01f).to_dtype(moments));
      v.push_back(random_f32(shape, rng, 1e-6f, 1e-4f).to_dtype(moments));
      if (copy != DType::F32) c.push_back(Tensor::zeros(shape, copy));
      wd.push_back(i % 2 == 0 ? 0.1 : 0.0);
    }
  }
  Slots clone() const {
    Slots out = *this;
    for (auto* list : {&out.p, &out.g, &out.m, &out.v, &out.c})
      for (Tensor& t : *list) t = t.clone();
    return out;
  }
  std::vector<ops::AdamWTensors> tensors(bool with_copy) {
    std::vector<ops::AdamWTensors> out;
    for (size_t i = 0; i < p.size(); ++i)
      out.push_back({&p[i], &g[i], &m[i], &v[i], wd[i], with_copy ? &c[i] : nullptr});
    return out;
  }
  void step(int64_t t, float grad_scale, bool with_copy) {
    ops::adamw_step_multi(tensors(with_copy), kLr, kBeta1, kBeta2, kEps, t, grad_scale);
  }
};

bool same_tensor_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.numel() == b.numel() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

float round_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

}  // namespace

TEST(OpsAdamwPrecision, ComputeCopyEqualsStepThenCastBitForBit) {
  std::mt19937 rng(91);
  for (const DType moments : {DType::F32, DType::BF16})
    for (const DType copy : {DType::BF16, DType::F16})
      for (const float grad_scale : {1.0f, 0.37f}) {
        SCOPED_TRACE(fmt::format("moments {} copy {} scale {}", dtype_name(moments), dtype_name(copy), grad_scale));
        Slots fused(rng, moments, copy);
        Slots separate = fused.clone();
        for (int64_t t = 1; t <= 3; ++t) {
          fused.step(t, grad_scale, true);
          separate.step(t, grad_scale, false);
          std::vector<const Tensor*> src;
          std::vector<Tensor*> dst;
          for (size_t i = 0; i < separate.p.size(); ++i) {
            src.push_back(&separate.p[i]);
            dst.push_back(&separate.c[i]);
          }
          ops::cast_multi(src, dst);
        }
        for (size_t i = 0; i < fused.p.size(); ++i) {
          SCOPED_TRACE(fmt::format("slot {}", i));
          EXPECT_TRUE(same_tensor_bits(fused.p[i], separate.p[i]));
          EXPECT_TRUE(same_tensor_bits(fused.m[i], separate.m[i]));
          EXPECT_TRUE(same_tensor_bits(fused.v[i], separate.v[i]));
          EXPECT_TRUE(same_tensor_bits(fused.c[i], separate.c[i]));
        }
      }
}

TEST(OpsAdamwPrecision, Bf16MomentsFollowTheirRoundingElementByElement) {
  // The definition written out per element in f32: widen, the f32 update, round to bf16 when stored, the parameter
  // update from the stored moments. beta1 0.3 takes torch's other lerp branch.
  std::mt19937 rng(92);
  for (const double beta1 : {0.9, 0.3}) {
    Slots s(rng, DType::BF16, DType::F32, {5000});
    Tensor p = s.p[0].clone(), m = s.m[0].to_dtype(DType::F32), v = s.v[0].to_dtype(DType::F32);
    for (int64_t t = 1; t <= 4; ++t) {
      ops::adamw_step_multi(s.tensors(false), kLr, beta1, kBeta2, kEps, t, 0.5f);
      const double bias1 = 1.0 - std::pow(beta1, static_cast<double>(t));
      const double bias2 = 1.0 - std::pow(kBeta2, static_cast<double>(t));
      const float decay = static_cast<float>(1.0 - kLr * s.wd[0]), w = static_cast<float>(1.0 - beta1);
      const float b2 = static_cast<float>(kBeta2), one_minus_b2 = static_cast<float>(1.0 - kBeta2);
      const float bias2_sqrt = static_cast<float>(std::sqrt(bias2)), eps = static_cast<float>(kEps);
      const float step_size = static_cast<float>(-(kLr / bias1));
      float* pp = p.data<float>();
      float* mp = m.data<float>();
      float* vp = v.data<float>();
      const float* gp = s.g[0].data<float>();
      for (int64_t i = 0; i < p.numel(); ++i) {
        const float gi = gp[i] * 0.5f;
        const float mi = w < 0.5f ? mp[i] + w * (gi - mp[i]) : gi - (gi - mp[i]) * (1.0f - w);
        mp[i] = round_bf16(mi);
        vp[i] = round_bf16(vp[i] * b2 + one_minus_b2 * gi * gi);
        pp[i] = pp[i] * decay + step_size * mp[i] / (std::sqrt(vp[i]) / bias2_sqrt + eps);
      }
    }
    SCOPED_TRACE(fmt::format("beta1 {}", beta1));
    EXPECT_TRUE(same_tensor_bits(s.p[0], p));
    EXPECT_TRUE(same_tensor_bits(s.m[0].to_dtype(DType::F32), m));
    EXPECT_TRUE(same_tensor_bits(s.v[0].to_dtype(DType::F32), v));
  }
}

TEST(OpsAdamwPrecision, Bf16MomentsMatchADoubleReference) {
  // Each step in double from the kernel's state before it: m and v updated from the stored bf16 values and rounded to
  // bf16 when stored (the kernel computes them in f32, so one may round to the neighbouring bf16 value: one bf16 ulp,
  // at most 2^-7 relative), and the parameter updated in double from the moments the kernel stored.
  std::mt19937 rng(93);
  const int64_t n = 20000;
  Slots s(rng, DType::BF16, DType::F32, {n});
  for (int64_t t = 1; t <= 10; ++t) {
    SCOPED_TRACE(fmt::format("step {}", t));
    const Doubles p0 = to_doubles(s.p[0]);
    const Doubles m0 = to_doubles(s.m[0].to_dtype(DType::F32)), v0 = to_doubles(s.v[0].to_dtype(DType::F32));
    s.g[0] = random_f32({n}, rng, -0.1f, 0.1f);
    s.step(t, 1.0f, false);
    const Doubles g = to_doubles(s.g[0]);
    const Doubles m1 = to_doubles(s.m[0].to_dtype(DType::F32)), v1 = to_doubles(s.v[0].to_dtype(DType::F32));
    const double bias1 = 1.0 - std::pow(kBeta1, static_cast<double>(t));
    const double bias2 = 1.0 - std::pow(kBeta2, static_cast<double>(t));
    Doubles m(m0.size()), v(v0.size()), p(p0.size());
    for (size_t i = 0; i < p.size(); ++i) {
      m[i] = round_bf16(static_cast<float>(m0[i] + (1.0 - kBeta1) * (g[i] - m0[i])));
      v[i] = round_bf16(static_cast<float>(v0[i] * kBeta2 + (1.0 - kBeta2) * g[i] * g[i]));
      p[i] = p0[i] * (1.0 - kLr * s.wd[0]) - kLr / bias1 * m1[i] / (std::sqrt(v1[i]) / std::sqrt(bias2) + kEps);
    }
    // m is a signed running mean: where its terms nearly cancel, f32 and double differ at the scale of the terms.
    ASSERT_TRUE(all_close(s.m[0].to_dtype(DType::F32), m, 1.0 / 128, 1e-6 * max_abs(m)));
    ASSERT_TRUE(all_close(s.v[0].to_dtype(DType::F32), v, 1.0 / 128, 1e-12));
    ASSERT_TRUE(all_close(s.p[0], p, 1e-6, 1e-7));
  }
}

TEST(OpsAdamwPrecision, Bf16MomentsChangeTheResult) {
  // The f32 path on the same (bf16-representable) start values: the stored moments' rounding must show.
  std::mt19937 rng(94);
  Slots low(rng, DType::BF16, DType::F32, {4096});
  Slots full = low.clone();
  full.m[0] = full.m[0].to_dtype(DType::F32);
  full.v[0] = full.v[0].to_dtype(DType::F32);
  for (int64_t t = 1; t <= 3; ++t) {
    low.step(t, 1.0f, false);
    full.step(t, 1.0f, false);
  }
  EXPECT_FALSE(same_tensor_bits(low.p[0], full.p[0]));
  EXPECT_EQ(low.m[0].nbytes() * 2, full.m[0].nbytes());
}

TEST(OpsAdamwPrecision, RejectsMixedOrUnsupportedDtypes) {
  Tensor p = Tensor::zeros({4}, DType::F32), g = Tensor::zeros({4}, DType::F32);
  Tensor m32 = Tensor::zeros({4}, DType::F32), v32 = m32.clone();
  Tensor m16 = Tensor::zeros({4}, DType::BF16), v16 = m16.clone();
  Tensor c16 = Tensor::zeros({4}, DType::BF16), c32 = Tensor::zeros({4}, DType::F32), c3 = Tensor::zeros({3}, DType::BF16);
  Tensor mh = Tensor::zeros({4}, DType::F16), vh = mh.clone();
  Tensor p2 = p.clone(), g2 = g.clone(), m2 = m32.clone(), v2 = m32.clone(), c2 = Tensor::zeros({4}, DType::F16);
  const auto run = [](const std::vector<ops::AdamWTensors>& slots) {
    ops::adamw_step_multi(slots, 1e-3, 0.9, 0.999, 1e-8, 1, 1.0f);
  };
  EXPECT_THROW(run({{&p, &g, &m32, &v16, 0.0}}), Error);                    // moments of two dtypes
  EXPECT_THROW(run({{&p, &g, &mh, &vh, 0.0}}), Error);                      // f16 moments
  EXPECT_THROW(run({{&p, &g, &m32, &v32, 0.0, &c32}}), Error);              // an f32 compute copy
  EXPECT_THROW(run({{&p, &g, &m32, &v32, 0.0, &c3}}), Error);               // a copy of another size
  EXPECT_THROW(run({{&p, &g, &m32, &v32, 0.0, &p}}), Error);                // the copy is the param
  EXPECT_THROW(run({{&p, &g, &m32, &v32, 0.0, &c16}, {&p2, &g2, &m2, &v2, 0.0}}), Error);       // copy in one slot
  EXPECT_THROW(run({{&p, &g, &m32, &v32, 0.0, &c16}, {&p2, &g2, &m2, &v2, 0.0, &c2}}), Error);  // copies differ
  EXPECT_THROW(run({{&p, &g, &m32, &v32, 0.0}, {&p2, &g2, &m16, &v16, 0.0}}), Error);           // moments differ
  EXPECT_NO_THROW(run({{&p, &g, &m16, &v16, 0.0, &c16}}));
}
