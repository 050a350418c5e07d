// Tests of packed varlen attention (GQA, causal or not) against a double-precision reference that materialises the
// score matrix, finite differences of the forward, and thread-count determinism.
#include <algorithm>
#include <cmath>

#include "kernels/ops.h"
#include "test_ops_util.h"

using namespace veomni;
using namespace veomni::test_ops;

namespace {

struct AttnCase {
  std::vector<int32_t> cu;
  int64_t hq, hkv, d;
  bool causal;
  float qk_range = 1.0f;  // larger values give peaked softmaxes
};

struct AttnTensors {
  Tensor q, k, v, dout;
};

struct AttnReference {
  Doubles out, lse, dq, dk, dv;
};

AttnTensors make_inputs(const AttnCase& c, std::mt19937& rng) {
  const int64_t s = c.cu.back();
  return {random_f32({s, c.hq, c.d}, rng, -c.qk_range, c.qk_range),
          random_f32({s, c.hkv, c.d}, rng, -c.qk_range, c.qk_range), random_f32({s, c.hkv, c.d}, rng),
          random_f32({s, c.hq, c.d}, rng)};
}

// Softmax attention per (sequence, head, query) with the full score row, forward and backward, in double.
AttnReference naive_attention(const AttnCase& c, const AttnTensors& t, double scale) {
  const int64_t s = c.cu.back(), d = c.d, group = c.hq / c.hkv;
  const Doubles q = to_doubles(t.q), k = to_doubles(t.k), v = to_doubles(t.v), dout = to_doubles(t.dout);
  AttnReference r{Doubles(q.size(), 0.0), Doubles(static_cast<size_t>(c.hq * s), 0.0), Doubles(q.size(), 0.0),
                  Doubles(k.size(), 0.0), Doubles(v.size(), 0.0)};
  auto qi = [&](int64_t tok, int64_t h) { return static_cast<size_t>((tok * c.hq + h) * d); };
  auto ki = [&](int64_t tok, int64_t h) { return static_cast<size_t>((tok * c.hkv + h) * d); };
  for (size_t b = 0; b + 1 < c.cu.size(); ++b)
    for (int64_t h = 0; h < c.hq; ++h) {
      const int64_t kvh = h / group;
      for (int64_t i = c.cu[b]; i < c.cu[b + 1]; ++i) {
        const int64_t end = c.causal ? i + 1 : c.cu[b + 1];
        Doubles p;
        for (int64_t j = c.cu[b]; j < end; ++j) {
          double dot = 0.0;
          for (int64_t e = 0; e < d; ++e) dot += q[qi(i, h) + e] * k[ki(j, kvh) + e];
          p.push_back(scale * dot);
        }
        const double m = *std::max_element(p.begin(), p.end());
        double sum = 0.0;
        for (double& x : p) sum += (x = std::exp(x - m));
        for (double& x : p) x /= sum;
        r.lse[static_cast<size_t>(h * s + i)] = m + std::log(sum);
        Doubles dp(p.size());
        double delta = 0.0;
        for (int64_t j = c.cu[b]; j < end; ++j) {
          const size_t jj = static_cast<size_t>(j - c.cu[b]);
          double dpv = 0.0;
          for (int64_t e = 0; e < d; ++e) {
            r.out[qi(i, h) + e] += p[jj] * v[ki(j, kvh) + e];
            dpv += dout[qi(i, h) + e] * v[ki(j, kvh) + e];
          }
          dp[jj] = dpv;
          delta += p[jj] * dpv;
        }
        for (int64_t j = c.cu[b]; j < end; ++j) {
          const size_t jj = static_cast<size_t>(j - c.cu[b]);
          const double ds = p[jj] * (dp[jj] - delta);
          for (int64_t e = 0; e < d; ++e) {
            r.dq[qi(i, h) + e] += scale * ds * k[ki(j, kvh) + e];
            r.dk[ki(j, kvh) + e] += scale * ds * q[qi(i, h) + e];
            r.dv[ki(j, kvh) + e] += p[jj] * dout[qi(i, h) + e];
          }
        }
      }
    }
  return r;
}

struct AttnResult {
  Tensor out, lse, dq, dk, dv;
};

AttnResult run(const AttnCase& c, const AttnTensors& t, float scale) {
  const int64_t s = c.cu.back();
  AttnResult r{Tensor::empty(t.q.shape(), DType::F32), Tensor::empty({c.hq, s}, DType::F32),
               Tensor::empty(t.q.shape(), DType::F32), Tensor::empty(t.k.shape(), DType::F32),
               Tensor::empty(t.v.shape(), DType::F32)};
  ops::attention_forward(t.q, t.k, t.v, c.cu, c.causal, scale, r.out, r.lse);
  ops::attention_backward(t.dout, t.q, t.k, t.v, r.out, r.lse, c.cu, c.causal, scale, r.dq, r.dk, r.dv);
  return r;
}

// Forward within rtol 1e-5 (atol out_atol); gradients within 1e-4 relative or 1e-5 of the largest gradient (single
// tokens have dq = dk = 0 exactly in theory, a few 1e-8 in fp32).
void expect_attention_matches(const AttnResult& got, const AttnReference& want, double out_atol = 1e-6) {
  EXPECT_TRUE(all_close(got.out, want.out, 1e-5, out_atol));
  EXPECT_TRUE(all_close(got.lse, want.lse, 1e-6, 1e-6));
  const double g = std::max({max_abs(want.dq), max_abs(want.dk), max_abs(want.dv)});
  EXPECT_TRUE(all_close(got.dq, want.dq, 1e-4, 1e-5 * g)) << "dq";
  EXPECT_TRUE(all_close(got.dk, want.dk, 1e-4, 1e-5 * g)) << "dk";
  EXPECT_TRUE(all_close(got.dv, want.dv, 1e-4, 1e-5 * g)) << "dv";
}

}  // namespace

TEST(OpsAttention, PackedGqaCausalAndNotMatchReference) {
  std::mt19937 rng(41);
  // Lengths 1, 37, 0, 70, 1, 130: single tokens, an empty sequence, and sequences crossing the 32/64 blocks.
  const std::vector<int32_t> cu = {0, 1, 38, 38, 108, 109, 239};
  for (const auto& [hq, hkv] : {std::pair<int64_t, int64_t>{2, 2}, {4, 2}, {8, 2}})
    for (bool causal : {true, false})
      for (int64_t d : {16, 7}) {
        const AttnCase c{cu, hq, hkv, d, causal};
        SCOPED_TRACE(::testing::Message() << "Hq " << hq << " Hkv " << hkv << " D " << d << " causal " << causal);
        const AttnTensors t = make_inputs(c, rng);
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        const AttnResult got = run(c, t, scale);
        expect_attention_matches(got, naive_attention(c, t, scale));
      }
}

TEST(OpsAttention, SingleTokenSequences) {
  std::mt19937 rng(42);
  for (const AttnCase& c :
       {AttnCase{{0, 1}, 4, 1, 8, true}, AttnCase{{0, 1}, 1, 1, 3, false}, AttnCase{{0, 1, 2, 3}, 2, 1, 5, false}}) {
    const AttnTensors t = make_inputs(c, rng);
    expect_attention_matches(run(c, t, 0.25f), naive_attention(c, t, 0.25));
  }
}

TEST(OpsAttention, PeakedScoresStayStable) {
  // Scores up to ~50: the online softmax must rescale without overflow. fp32 scores of that size carry ~1e-5
  // absolute error (any fp32 implementation does), which reaches the output at that level.
  std::mt19937 rng(45);
  for (const AttnCase& c : {AttnCase{{0, 90, 100}, 4, 4, 16, true, 6.0f}, AttnCase{{0, 100}, 2, 1, 16, false, 6.0f}}) {
    SCOPED_TRACE(::testing::Message() << "causal " << c.causal);
    const AttnTensors t = make_inputs(c, rng);
    expect_attention_matches(run(c, t, 0.25f), naive_attention(c, t, 0.25), 2e-5);
  }
}

TEST(OpsAttention, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(43);
  for (bool causal : {true, false}) {
    const AttnCase c{{0, 3, 8}, 4, 2, 4, causal};
    AttnTensors t = make_inputs(c, rng);
    const float scale = 0.5f;
    auto loss = [&] {
      Tensor out = Tensor::empty(t.q.shape(), DType::F32), lse = Tensor::empty({c.hq, 8}, DType::F32);
      ops::attention_forward(t.q, t.k, t.v, c.cu, c.causal, scale, out, lse);
      return project(out, t.dout);
    };
    const AttnResult r = run(c, t, scale);
    expect_gradient("dq", t.q, r.dq, loss);
    expect_gradient("dk", t.k, r.dk, loss);
    expect_gradient("dv", t.v, r.dv, loss);
  }
}

TEST(OpsAttention, BitwiseIndependentOfThreadCount) {
  std::mt19937 rng(44);
  const AttnCase c{{0, 150, 151, 300}, 4, 2, 32, true};
  const AttnTensors t = make_inputs(c, rng);
  AttnResult one, two, three;
  with_threads(1, [&] { one = run(c, t, 0.2f); });
  with_threads(2, [&] { two = run(c, t, 0.2f); });
  with_threads(3, [&] { three = run(c, t, 0.2f); });
  for (const AttnResult* r : {&two, &three}) {
    EXPECT_TRUE(bitwise_equal(one.out, r->out));
    EXPECT_TRUE(bitwise_equal(one.lse, r->lse));
    EXPECT_TRUE(bitwise_equal(one.dq, r->dq));
    EXPECT_TRUE(bitwise_equal(one.dk, r->dk));
    EXPECT_TRUE(bitwise_equal(one.dv, r->dv));
  }
}

TEST(OpsAttention, RejectsBadArguments) {
  const Tensor q = Tensor::zeros({5, 4, 8}, DType::F32), k = Tensor::zeros({5, 2, 8}, DType::F32);
  Tensor out = Tensor::zeros({5, 4, 8}, DType::F32), lse = Tensor::zeros({4, 5}, DType::F32);
  EXPECT_NO_THROW(ops::attention_forward(q, k, k.clone(), {0, 2, 5}, true, 0.3f, out, lse));
  const Tensor k3 = Tensor::zeros({5, 3, 8}, DType::F32);
  EXPECT_THROW(ops::attention_forward(q, k3, k3.clone(), {0, 5}, true, 0.3f, out, lse), Error);  // 4 % 3
  EXPECT_THROW(ops::attention_forward(q, k, k.clone(), {0, 4}, true, 0.3f, out, lse), Error);    // ends before S
  EXPECT_THROW(ops::attention_forward(q, k, k.clone(), {1, 5}, true, 0.3f, out, lse), Error);
  EXPECT_THROW(ops::attention_forward(q, k, k.clone(), {0, 3, 2, 5}, true, 0.3f, out, lse), Error);
  EXPECT_THROW(ops::attention_forward(q, k, Tensor::zeros({5, 2, 4}, DType::F32), {0, 5}, true, 0.3f, out, lse), Error);
  Tensor lse_t = Tensor::zeros({5, 4}, DType::F32);
  EXPECT_THROW(ops::attention_forward(q, k, k.clone(), {0, 5}, true, 0.3f, out, lse_t), Error);
  EXPECT_THROW(ops::attention_forward(q.view({5, 32}), k, k.clone(), {0, 5}, true, 0.3f, out, lse), Error);
  Tensor dq = Tensor::zeros({5, 4, 8}, DType::F32), dk = k.clone(), dv = k.clone();
  EXPECT_THROW(ops::attention_backward(out, q, k, k.clone(), out, lse, {0, 5}, true, 0.3f, dq, dq, dv), Error);
  EXPECT_NO_THROW(ops::attention_backward(out, q, k, k.clone(), out, lse, {0, 5}, true, 0.3f, dq, dk, dv));
}
