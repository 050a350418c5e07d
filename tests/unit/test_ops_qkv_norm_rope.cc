// Tests of qkv_norm_rope_forward (unpacking, the per-head RMSNorm and RoPE of packed q/k/v projections) and its
// backward on the CPU reference: the forward against the separate ops, the backward against finite differences.
#include <cstring>

#include "kernels/ops.h"
#include "test_ops_util.h"

using namespace veomni;
using namespace veomni::test_ops;

namespace {

// Four tokens of 4 query heads and 2 kv heads of 8 dimensions (GQA), random gains, tables at positions 0, 3, 8, 100.
struct Case {
  static constexpr int64_t s = 4, hq = 4, hkv = 2, d = 8, width = (hq + 2 * hkv) * d;
  std::mt19937 rng{41};
  Tensor qkv = random_f32({s, width}, rng, -2.0f, 2.0f);
  Tensor q_norm = random_f32({d}, rng, 0.5f, 1.5f);
  Tensor k_norm = random_f32({d}, rng, 0.5f, 1.5f);
  Tensor cos, sin;
  Case() {
    const Tensor pos = Tensor::from_vector<int64_t>({0, 3, 8, 100}, {s});
    cos = Tensor::empty({s, d}, DType::F32);
    sin = Tensor::empty({s, d}, DType::F32);
    ops::rope_tables(pos, d, 1e4, {}, cos, sin);
  }
  // Columns [first, first + heads * d) of qkv as [S, heads, D].
  Tensor columns(int64_t first, int64_t heads) const {
    Tensor out = Tensor::empty({s, heads, d}, DType::F32);
    for (int64_t t = 0; t < s; ++t)
      std::memcpy(out.data<float>() + t * heads * d, qkv.data<float>() + t * width + first,
                  static_cast<size_t>(heads * d) * sizeof(float));
    return out;
  }
  struct Out {
    Tensor q, k, v, q_rstd, k_rstd;
  };
  Out forward() const {
    Out o{Tensor::empty({s, hq, d}, DType::F32), Tensor::empty({s, hkv, d}, DType::F32),
          Tensor::empty({s, hkv, d}, DType::F32), Tensor::empty({s * hq}, DType::F32),
          Tensor::empty({s * hkv}, DType::F32)};
    ops::qkv_norm_rope_forward(qkv, q_norm, k_norm, 1e-6f, cos, sin, o.q, o.k, o.v, o.q_rstd, o.k_rstd);
    return o;
  }
};

// The separate ops on heads unpacked by hand: RMSNorm over every head, then the rotation.
Tensor norm_then_rotate(const Tensor& heads, const Tensor& gain, const Case& c, Tensor& rstd) {
  const int64_t rows = heads.dim(0) * heads.dim(1);
  Tensor y = Tensor::empty({rows, c.d}, DType::F32);
  rstd = Tensor::empty({rows}, DType::F32);
  ops::rmsnorm_forward(heads.view({rows, c.d}), gain, 1e-6f, y, rstd);
  Tensor rotated = y.view(heads.shape());
  ops::rope_apply(rotated, c.cos, c.sin, false);
  return rotated;
}

TEST(OpsQkvNormRope, ForwardIsTheSeparateOpsOnTheUnpackedHeads) {
  const Case c;
  const Case::Out got = c.forward();
  Tensor q_rstd, k_rstd;
  EXPECT_TRUE(bitwise_equal(got.q, norm_then_rotate(c.columns(0, c.hq), c.q_norm, c, q_rstd)));
  EXPECT_TRUE(bitwise_equal(got.k, norm_then_rotate(c.columns(c.hq * c.d, c.hkv), c.k_norm, c, k_rstd)));
  EXPECT_TRUE(bitwise_equal(got.v, c.columns((c.hq + c.hkv) * c.d, c.hkv)));
  EXPECT_TRUE(bitwise_equal(got.q_rstd, q_rstd));
  EXPECT_TRUE(bitwise_equal(got.k_rstd, k_rstd));
}

// dqkv against central differences of <q, Pq> + <k, Pk> + <v, Pv> over every packed column (the value columns too).
TEST(OpsQkvNormRope, BackwardIsTheGradientOfThePackedColumns) {
  Case c;
  std::mt19937 rng(42);
  const Tensor pq = random_f32({c.s, c.hq, c.d}, rng), pk = random_f32({c.s, c.hkv, c.d}, rng);
  const Tensor pv = random_f32({c.s, c.hkv, c.d}, rng);
  const Case::Out fwd = c.forward();
  Tensor dqkv = Tensor::empty(c.qkv.shape(), DType::F32);
  ops::qkv_norm_rope_backward(pq, pk, pv, c.qkv, c.q_norm, c.k_norm, fwd.q_rstd, fwd.k_rstd, c.cos, c.sin, dqkv);
  auto loss = [&] {
    const Case::Out o = c.forward();
    return project(o.q, pq) + project(o.k, pk) + project(o.v, pv);
  };
  expect_gradient("dqkv", c.qkv, dqkv, loss, 1e-2f, 2e-3, static_cast<int>(c.qkv.numel()));
}

TEST(OpsQkvNormRope, RejectsBadArguments) {
  const Case c;
  Case::Out o = c.forward();
  Tensor wide_q = Tensor::empty({c.s, c.hq + 1, c.d}, DType::F32);
  EXPECT_THROW(ops::qkv_norm_rope_forward(c.qkv, c.q_norm, c.k_norm, 1e-6f, c.cos, c.sin, wide_q, o.k, o.v,
                                          o.q_rstd, o.k_rstd),
               Error);
  Tensor short_rstd = Tensor::empty({c.s}, DType::F32);
  EXPECT_THROW(ops::qkv_norm_rope_forward(c.qkv, c.q_norm, c.k_norm, 1e-6f, c.cos, c.sin, o.q, o.k, o.v, short_rstd,
                                          o.k_rstd),
               Error);
  Tensor in_place = c.qkv;
  EXPECT_THROW(ops::qkv_norm_rope_backward(o.q, o.k, o.v, c.qkv, c.q_norm, c.k_norm, o.q_rstd, o.k_rstd, c.cos, c.sin,
                                           in_place),
               Error);
}

}  // namespace
