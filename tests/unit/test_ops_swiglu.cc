// Tests of SwiGLU (split and fused layouts) against a double-precision reference and finite differences.
#include <cmath>

#include "kernels/ops.h"
#include "test_ops_util.h"

using namespace veomni;
using namespace veomni::test_ops;

namespace {

double silu(double g) { return g / (1.0 + std::exp(-g)); }
double dsilu(double g) {
  const double s = 1.0 / (1.0 + std::exp(-g));
  return s * (1.0 + g * (1.0 - s));
}

}  // namespace

TEST(OpsSwiglu, ForwardAndBackwardMatchReference) {
  std::mt19937 rng(21);
  const int64_t n = 13, i = 37;
  const Tensor gate = random_f32({n, i}, rng, -8.0f, 8.0f);
  const Tensor up = random_f32({n, i}, rng, -2.0f, 2.0f);
  const Tensor dout = random_f32({n, i}, rng);
  Tensor out = Tensor::empty({n, i}, DType::F32), dgate = out.clone(), dup = out.clone();
  ops::swiglu_forward(gate, up, out);
  ops::swiglu_backward(dout, gate, up, dgate, dup);
  const Doubles g = to_doubles(gate), u = to_doubles(up), d = to_doubles(dout);
  Doubles want_out(g.size()), want_dgate(g.size()), want_dup(g.size());
  for (size_t k = 0; k < g.size(); ++k) {
    want_out[k] = silu(g[k]) * u[k];
    want_dgate[k] = d[k] * u[k] * dsilu(g[k]);
    want_dup[k] = d[k] * silu(g[k]);
  }
  EXPECT_TRUE(all_close(out, want_out, 1e-6, 1e-7));
  EXPECT_TRUE(all_close(dgate, want_dgate, 1e-6, 1e-7));
  EXPECT_TRUE(all_close(dup, want_dup, 1e-6, 1e-7));
}

TEST(OpsSwiglu, FusedLayoutEqualsSplitLayoutBitwise) {
  std::mt19937 rng(22);
  const int64_t n = 6, i = 19;
  const Tensor gate_up = random_f32({n, 2 * i}, rng, -5.0f, 5.0f);
  const Tensor dout = random_f32({n, i}, rng);
  Tensor gate = Tensor::empty({n, i}, DType::F32), up = gate.clone();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < i; ++c) {
      gate.data<float>()[r * i + c] = gate_up.data<float>()[r * 2 * i + c];
      up.data<float>()[r * i + c] = gate_up.data<float>()[r * 2 * i + i + c];
    }
  Tensor out = Tensor::empty({n, i}, DType::F32), fused_out = out.clone();
  Tensor dgate = out.clone(), dup = out.clone(), dgate_up = Tensor::empty({n, 2 * i}, DType::F32);
  ops::swiglu_forward(gate, up, out);
  ops::swiglu_fused_forward(gate_up, fused_out);
  EXPECT_TRUE(bitwise_equal(out, fused_out));
  ops::swiglu_backward(dout, gate, up, dgate, dup);
  ops::swiglu_fused_backward(dout, gate_up, dgate_up);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < i; ++c) {
      ASSERT_EQ(dgate_up.data<float>()[r * 2 * i + c], dgate.data<float>()[r * i + c]);
      ASSERT_EQ(dgate_up.data<float>()[r * 2 * i + i + c], dup.data<float>()[r * i + c]);
    }
}

TEST(OpsSwiglu, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(23);
  Tensor gate_up = random_f32({3, 10}, rng, -4.0f, 4.0f);
  const Tensor proj = random_f32({3, 5}, rng);
  auto loss = [&] {
    Tensor out = Tensor::empty({3, 5}, DType::F32);
    ops::swiglu_fused_forward(gate_up, out);
    return project(out, proj);
  };
  Tensor dgate_up = Tensor::empty({3, 10}, DType::F32);
  ops::swiglu_fused_backward(proj, gate_up, dgate_up);
  expect_gradient("dgate_up", gate_up, dgate_up, loss, 1e-3f);
}

TEST(OpsSwiglu, RejectsBadShapes) {
  Tensor a = Tensor::zeros({2, 3}, DType::F32), b = Tensor::zeros({2, 4}, DType::F32);
  Tensor out = Tensor::zeros({2, 3}, DType::F32);
  EXPECT_THROW(ops::swiglu_forward(a, b, out), Error);
  EXPECT_THROW(ops::swiglu_forward(a, a, a), Error);  // out overlaps its inputs
  Tensor odd = Tensor::zeros({2, 5}, DType::F32);
  EXPECT_THROW(ops::swiglu_fused_forward(odd, out), Error);
  EXPECT_THROW(ops::swiglu_fused_forward(b, out), Error);  // [2, 4] gives [2, 2]
  Tensor dgu = Tensor::zeros({2, 6}, DType::F32);
  EXPECT_THROW(ops::swiglu_fused_backward(out, b, dgu), Error);
}
