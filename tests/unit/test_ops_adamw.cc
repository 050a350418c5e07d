// Tests of adamw_step against torch.optim.AdamW's update written out in double, and of the multi-tensor optimizer ops.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/ops.h"
#include "test_ops_util.h"

using namespace veomni;
using namespace veomni::test_ops;

namespace {

struct Hyper {
  double lr, beta1, beta2, eps, wd;
};

// torch's _single_tensor_adamw in double: decay, lerp, second moment, bias corrections, addcdiv.
void reference_step(Doubles& p, const Doubles& g, Doubles& m, Doubles& v, const Hyper& h, int64_t step) {
  const double bias1 = 1.0 - std::pow(h.beta1, static_cast<double>(step));
  const double bias2 = 1.0 - std::pow(h.beta2, static_cast<double>(step));
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] *= 1.0 - h.lr * h.wd;
    m[i] += (1.0 - h.beta1) * (g[i] - m[i]);
    v[i] = v[i] * h.beta2 + (1.0 - h.beta2) * g[i] * g[i];
    p[i] -= h.lr / bias1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bias2) + h.eps);
  }
}

void step(Tensor& p, const Tensor& g, Tensor& m, Tensor& v, const Hyper& h, int64_t t) {
  ops::adamw_step(p, g, m, v, h.lr, h.beta1, h.beta2, h.eps, h.wd, t);
}

}  // namespace

TEST(OpsAdamw, FirstStepKnownValues) {
  // m = 0.05, v = 2.5e-4, bias corrections 0.1 and 1e-3: p = 1 - (0.1/0.1) * 0.05 / (0.5 + 1e-8) = 0.9.
  Tensor p = Tensor::from_vector<float>({1.0f, 2.0f}, {2});
  const Tensor g = Tensor::from_vector<float>({0.5f, 0.5f}, {2});
  Tensor m = Tensor::zeros({2}, DType::F32), v = Tensor::zeros({2}, DType::F32);
  step(p, g, m, v, {0.1, 0.9, 0.999, 1e-8, 0.0}, 1);
  EXPECT_NEAR(p.data<float>()[0], 0.9, 1e-7);
  EXPECT_NEAR(p.data<float>()[1], 1.9, 2e-7);
  EXPECT_NEAR(m.data<float>()[0], 0.05, 1e-9);
  EXPECT_NEAR(v.data<float>()[0], 2.5e-4, 1e-10);
  // Decoupled weight decay first: 2 * (1 - 0.1 * 0.1) - 0.1 = 1.88.
  Tensor p2 = Tensor::from_vector<float>({2.0f}, {1});
  Tensor m2 = Tensor::zeros({1}, DType::F32), v2 = Tensor::zeros({1}, DType::F32);
  step(p2, g.slice(0, 1), m2, v2, {0.1, 0.9, 0.999, 1e-8, 0.1}, 1);
  EXPECT_NEAR(p2.data<float>()[0], 1.88, 2e-7);
}

TEST(OpsAdamw, TenStepsMatchTorchArithmetic) {
  std::mt19937 rng(81);
  const int64_t n = 40000;  // several parallel chunks
  const Hyper h{3e-3, 0.9, 0.95, 1e-8, 0.1};
  Tensor p = random_f32({n}, rng), m = Tensor::zeros({n}, DType::F32), v = Tensor::zeros({n}, DType::F32);
  Doubles pd = to_doubles(p), md(static_cast<size_t>(n), 0.0), vd = md;
  for (int64_t t = 1; t <= 10; ++t) {
    const Tensor g = random_f32({n}, rng, -0.1f, 0.1f);
    step(p, g, m, v, h, t);
    reference_step(pd, to_doubles(g), md, vd, h, t);
  }
  // m is a signed running mean: where it nearly cancels, compare at the scale of its largest entries.
  EXPECT_TRUE(all_close(p, pd, 1e-6, 1e-7));
  EXPECT_TRUE(all_close(m, md, 1e-5, 1e-6 * max_abs(md)));
  EXPECT_TRUE(all_close(v, vd, 1e-5, 0.0));
}

TEST(OpsAdamw, HyperParametersKeepTheirDecimalValues) {
  // torch computes with beta2 = 0.999 exactly (a double); the float 0.999f is 1.3e-5 away in 1 - beta2. With p = 0
  // and no decay the new parameter is the bare update, compared at 1e-6 relative after 1000 steps of bias correction.
  std::mt19937 rng(82);
  const int64_t n = 1000;
  const Hyper h{1e-3, 0.9, 0.999, 1e-8, 0.0};
  Tensor p = Tensor::zeros({n}, DType::F32);
  Tensor m = random_f32({n}, rng, -0.01f, 0.01f), v = random_f32({n}, rng, 1e-6f, 1e-4f);
  const Tensor g = random_f32({n}, rng, -0.01f, 0.01f);
  Doubles pd(static_cast<size_t>(n), 0.0), md = to_doubles(m), vd = to_doubles(v);
  step(p, g, m, v, h, 1000);
  reference_step(pd, to_doubles(g), md, vd, h, 1000);
  EXPECT_TRUE(all_close(p, pd, 1e-6, 2e-7 * max_abs(pd)));
}

TEST(OpsAdamw, RejectsBadArguments) {
  Tensor p = Tensor::zeros({4}, DType::F32), g = Tensor::zeros({4}, DType::F32);
  Tensor m = Tensor::zeros({4}, DType::F32), v = Tensor::zeros({3}, DType::F32);
  EXPECT_THROW(ops::adamw_step(p, g, m, v, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1), Error);
  Tensor v4 = Tensor::zeros({4}, DType::F32);
  EXPECT_THROW(ops::adamw_step(p, g, m, v4, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0), Error);   // step 0
  EXPECT_THROW(ops::adamw_step(p, g, m, v4, 1e-3f, 1.0f, 0.999f, 1e-8f, 0.0f, 1), Error);   // beta1 = 1
  EXPECT_THROW(ops::adamw_step(p, g, m, v4, -1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1), Error);  // lr < 0
  EXPECT_THROW(ops::adamw_step(p, p, m, v4, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1), Error);   // grad is param
  Tensor g16 = Tensor::zeros({4}, DType::BF16);
  EXPECT_THROW(ops::adamw_step(p, g16, m, v4, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1), Error);
  EXPECT_NO_THROW(ops::adamw_step(p, g, m, v4, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1));
}

namespace {

// Slots of different sizes (one empty, one spanning several parallel chunks), each with its own weight decay.
struct MultiSlots {
  std::vector<Tensor> p, g, m, v;
  std::vector<double> wd;

  MultiSlots(std::mt19937& rng, const std::vector<int64_t>& sizes) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      p.push_back(random_f32({sizes[i]}, rng));
      g.push_back(random_f32({sizes[i]}, rng, -0.1f, 0.1f));
      m.push_back(random_f32({sizes[i]}, rng, -0.01f, 0.01f));
      v.push_back(random_f32({sizes[i]}, rng, 1e-6f, 1e-4f));
      wd.push_back(i % 2 == 0 ? 0.1 : 0.0);
    }
  }
  MultiSlots clone() const {
    MultiSlots c = *this;
    for (auto* list : {&c.p, &c.g, &c.m, &c.v})
      for (Tensor& t : *list) t = t.clone();
    return c;
  }
  std::vector<ops::AdamWTensors> tensors() {
    std::vector<ops::AdamWTensors> out;
    for (size_t i = 0; i < p.size(); ++i) out.push_back({&p[i], &g[i], &m[i], &v[i], wd[i]});
    return out;
  }
};

}  // namespace

TEST(OpsAdamw, MultiEqualsScaleThenSingleStepBitForBit) {
  std::mt19937 rng(83);
  const std::vector<int64_t> sizes{1, 0, 40000, 17};
  const Hyper h{3e-3, 0.9, 0.95, 1e-8, 0.0};
  for (const float grad_scale : {1.0f, 0.37f}) {
    MultiSlots multi(rng, sizes);
    MultiSlots single = multi.clone();
    for (int64_t t = 1; t <= 3; ++t) {
      ops::adamw_step_multi(multi.tensors(), h.lr, h.beta1, h.beta2, h.eps, t, grad_scale);
      for (size_t i = 0; i < sizes.size(); ++i) {
        Tensor scaled = single.g[i].clone();
        ops::scale_(scaled, grad_scale);
        ops::adamw_step(single.p[i], scaled, single.m[i], single.v[i], h.lr, h.beta1, h.beta2, h.eps, single.wd[i], t);
      }
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      SCOPED_TRACE(fmt::format("slot {} scale {}", i, grad_scale));
      EXPECT_EQ(std::memcmp(multi.p[i].raw_data(), single.p[i].raw_data(), multi.p[i].nbytes()), 0);
      EXPECT_EQ(std::memcmp(multi.m[i].raw_data(), single.m[i].raw_data(), multi.m[i].nbytes()), 0);
      EXPECT_EQ(std::memcmp(multi.v[i].raw_data(), single.v[i].raw_data(), multi.v[i].nbytes()), 0);
      // The gradient is read scaled, not rewritten.
      EXPECT_EQ(std::memcmp(multi.g[i].raw_data(), single.g[i].raw_data(), multi.g[i].nbytes()), 0);
    }
  }
  // A scale of 0.37 must change the result (the test can fail).
  MultiSlots a(rng, {64}), b = a.clone();
  ops::adamw_step_multi(a.tensors(), 1e-2, 0.9, 0.999, 1e-8, 1, 1.0f);
  ops::adamw_step_multi(b.tensors(), 1e-2, 0.9, 0.999, 1e-8, 1, 0.37f);
  EXPECT_NE(std::memcmp(a.m[0].raw_data(), b.m[0].raw_data(), a.m[0].nbytes()), 0);
}

TEST(OpsAdamw, MultiRejectsBadSlots) {
  Tensor p = Tensor::zeros({4}, DType::F32), g = Tensor::zeros({4}, DType::F32);
  Tensor m = Tensor::zeros({4}, DType::F32), v = Tensor::zeros({3}, DType::F32), v4 = Tensor::zeros({4}, DType::F32);
  EXPECT_THROW(ops::adamw_step_multi({{&p, &g, &m, &v, 0.0}}, 1e-3, 0.9, 0.999, 1e-8, 1, 1.0f), Error);
  EXPECT_THROW(ops::adamw_step_multi({{&p, &g, &m, &v4, -0.1}}, 1e-3, 0.9, 0.999, 1e-8, 1, 1.0f), Error);
  EXPECT_THROW(ops::adamw_step_multi({{&p, &g, &m, &v4, 0.0}}, 1e-3, 0.9, 0.999, 1e-8, 1, -1.0f), Error);
  EXPECT_THROW(ops::adamw_step_multi({{&p, &p, &m, &v4, 0.0}}, 1e-3, 0.9, 0.999, 1e-8, 1, 1.0f), Error);
  EXPECT_THROW(ops::adamw_step_multi({{&p, nullptr, &m, &v4, 0.0}}, 1e-3, 0.9, 0.999, 1e-8, 1, 1.0f), Error);
  EXPECT_NO_THROW(ops::adamw_step_multi({}, 1e-3, 0.9, 0.999, 1e-8, 1, 1.0f));
  EXPECT_NO_THROW(ops::adamw_step_multi({{&p, &g, &m, &v4, 0.0}}, 1e-3, 0.9, 0.999, 1e-8, 1, 1.0f));
}

TEST(OpsMultiTensor, SumSquaresAndCastEqualTheirSingleTensorOps) {
  std::mt19937 rng(84);
  std::vector<Tensor> xs{random_f32({5}, rng), Tensor::zeros({0}, DType::F32), random_f32({3000}, rng)};
  std::vector<const Tensor*> ptrs{&xs[0], &xs[1], &xs[2]};
  EXPECT_EQ(ops::sum_squares_multi(ptrs), ops::sum_squares(xs[0]) + ops::sum_squares(xs[1]) + ops::sum_squares(xs[2]));
  double want = 0.0;  // the definition, in double
  for (double x : to_doubles(xs[0])) want += x * x;
  EXPECT_NEAR(ops::sum_squares_multi({&xs[0]}), want, 1e-12);
  EXPECT_EQ(ops::sum_squares_multi({}), 0.0);
  Tensor bf16 = Tensor::zeros({3}, DType::BF16);
  EXPECT_THROW(ops::sum_squares_multi({&bf16}), Error);  // gradients are f32

  std::vector<Tensor> dst{Tensor::empty({5}, DType::F32), Tensor::empty({0}, DType::F32), Tensor::empty({3000}, DType::F32)};
  std::vector<Tensor*> dptrs{&dst[0], &dst[1], &dst[2]};
  ops::cast_multi(ptrs, dptrs);
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(std::memcmp(dst[i].raw_data(), xs[i].raw_data(), xs[i].nbytes()), 0);
  Tensor wrong = Tensor::empty({4}, DType::F32);
  std::vector<Tensor*> bad{&wrong};
  EXPECT_THROW(ops::cast_multi({&xs[0]}, bad), Error);             // sizes differ
  EXPECT_THROW(ops::cast_multi({&xs[0], &xs[2]}, bad), Error);     // counts differ
}
