// Tests of adamw_step against torch.optim.AdamW's update (single-tensor path) written out in double.
#include <cmath>

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
