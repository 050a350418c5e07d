// Speech ops (conv1d, transposed conv1d, SnakeBeta, layer scale, SiLU, gated add, clamp, sliding-window attention)
// against naive double loops written straight from torch's definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "kernels/ops.h"
#include "tests/unit/test_ops_util.h"

namespace veomni {
namespace {

using test_ops::all_close;
using test_ops::Doubles;
using test_ops::random_f32;

// torch.nn.functional.conv1d on F.pad(x, (left, right)), channels-first semantics on our [L, C] layout.
Doubles naive_conv1d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride, int64_t dilation,
                     int64_t groups, int64_t left, int64_t right) {
  const int64_t len = x.dim(0), cin = x.dim(1), cout = w.dim(0), cg = w.dim(1), kernel = w.dim(2);
  const int64_t padded = len + left + right, out_len = (padded - dilation * (kernel - 1) - 1) / stride + 1;
  Doubles out(static_cast<size_t>(out_len * cout));
  for (int64_t t = 0; t < out_len; ++t)
    for (int64_t o = 0; o < cout; ++o) {
      double acc = b.defined() ? b.item_as_double(o) : 0.0;
      const int64_t g = o / (cout / groups);
      for (int64_t c = 0; c < cg; ++c)
        for (int64_t k = 0; k < kernel; ++k) {
          const int64_t src = t * stride + k * dilation - left;
          if (src < 0 || src >= len) continue;
          acc += w.item_as_double((o * cg + c) * kernel + k) * x.item_as_double(src * cin + g * cg + c);
        }
      out[static_cast<size_t>(t * cout + o)] = acc;
    }
  (void)cin;
  return out;
}

TEST(OpsSpeech, Conv1dMatchesNaiveWithDilationGroupsStrideAndCausalPadding) {
  std::mt19937 rng(7);
  struct Case {
    int64_t len, cin, cout, kernel, stride, dilation, groups, left, right;
  };
  const Case cases[] = {
      {20, 6, 4, 7, 1, 1, 1, 6, 0},  // causal kernel 7
      {30, 4, 4, 7, 1, 9, 1, 54, 0},  // causal, dilation 9 (the decoder's third residual unit)
      {16, 8, 8, 7, 1, 1, 8, 6, 0},  // depthwise (ConvNeXt's dwconv)
      {17, 6, 9, 3, 2, 2, 3, 3, 1},  // grouped, strided, padded on both sides
      {5, 3, 2, 1, 1, 1, 1, 0, 0},   // pointwise
  };
  for (const Case& c : cases) {
    const Tensor x = random_f32({c.len, c.cin}, rng);
    const Tensor w = random_f32({c.cout, c.cin / c.groups, c.kernel}, rng);
    const Tensor b = random_f32({c.cout}, rng);
    const Doubles want = naive_conv1d(x, w, b, c.stride, c.dilation, c.groups, c.left, c.right);
    Tensor out = Tensor::empty({static_cast<int64_t>(want.size()) / c.cout, c.cout}, DType::F32);
    ops::conv1d_forward(x, w, b, c.stride, c.dilation, c.groups, c.left, c.right, out);
    EXPECT_TRUE(all_close(out, want, 1e-5, 1e-5)) << "len " << c.len << " dilation " << c.dilation;
    // Without a bias.
    const Doubles want_nobias = naive_conv1d(x, w, Tensor(), c.stride, c.dilation, c.groups, c.left, c.right);
    ops::conv1d_forward(x, w, Tensor(), c.stride, c.dilation, c.groups, c.left, c.right, out);
    EXPECT_TRUE(all_close(out, want_nobias, 1e-5, 1e-5));
  }
}

TEST(OpsSpeech, Conv1dRejectsBadShapes) {
  const Tensor x = Tensor::zeros({10, 4}, DType::F32);
  const Tensor w = Tensor::zeros({4, 3, 3}, DType::F32);  // 3 input channels per group, x has 4
  Tensor out = Tensor::zeros({8, 4}, DType::F32);
  EXPECT_THROW(ops::conv1d_forward(x, w, Tensor(), 1, 1, 1, 0, 0, out), Error);
  const Tensor w4 = Tensor::zeros({4, 4, 3}, DType::F32);
  Tensor wrong_len = Tensor::zeros({9, 4}, DType::F32);
  EXPECT_THROW(ops::conv1d_forward(x, w4, Tensor(), 1, 1, 1, 0, 0, wrong_len), Error);
}

// torch conv_transpose1d (scatter form), then rows [trim, trim + out_len).
Doubles naive_conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride, int64_t trim,
                               int64_t out_len) {
  const int64_t len = x.dim(0), cin = x.dim(1), cout = w.dim(1), kernel = w.dim(2);
  const int64_t full = (len - 1) * stride + kernel;
  Doubles all(static_cast<size_t>(full * cout), 0.0);
  for (int64_t i = 0; i < len; ++i)
    for (int64_t c = 0; c < cin; ++c)
      for (int64_t o = 0; o < cout; ++o)
        for (int64_t k = 0; k < kernel; ++k)
          all[static_cast<size_t>((i * stride + k) * cout + o)] +=
              x.item_as_double(i * cin + c) * w.item_as_double((c * cout + o) * kernel + k);
  Doubles out;
  for (int64_t t = trim; t < trim + out_len; ++t)
    for (int64_t o = 0; o < cout; ++o)
      out.push_back(all[static_cast<size_t>(t * cout + o)] + (b.defined() ? b.item_as_double(o) : 0.0));
  return out;
}

TEST(OpsSpeech, ConvTranspose1dMatchesNaiveScatter) {
  std::mt19937 rng(11);
  struct Case {
    int64_t len, cin, cout, kernel, stride, trim;
  };
  // (kernel 2r, stride r, trim r): the decoder blocks; (r, r, 0): the upsample stages; an odd overlap.
  const Case cases[] = {{9, 6, 3, 16, 8, 8}, {7, 4, 4, 2, 2, 0}, {6, 3, 5, 5, 2, 3}, {1, 2, 2, 6, 3, 3}};
  for (const Case& c : cases) {
    const Tensor x = random_f32({c.len, c.cin}, rng);
    const Tensor w = random_f32({c.cin, c.cout, c.kernel}, rng);
    const Tensor b = random_f32({c.cout}, rng);
    const int64_t out_len = (c.len - 1) * c.stride + c.kernel - 2 * c.trim;
    Tensor out = Tensor::empty({out_len, c.cout}, DType::F32);
    ops::conv_transpose1d_forward(x, w, b, c.stride, c.trim, out);
    EXPECT_TRUE(all_close(out, naive_conv_transpose1d(x, w, b, c.stride, c.trim, out_len), 1e-5, 1e-5))
        << "kernel " << c.kernel << " stride " << c.stride;
  }
}

TEST(OpsSpeech, SnakeBetaMatchesDefinition) {
  std::mt19937 rng(3);
  const Tensor x = random_f32({13, 5}, rng, -3.0f, 3.0f);
  const Tensor alpha = random_f32({5}, rng, -1.0f, 1.0f), beta = random_f32({5}, rng, -1.0f, 1.0f);
  Tensor y = Tensor::empty({13, 5}, DType::F32);
  ops::snake_beta_forward(x, alpha, beta, y);
  Doubles want;
  for (int64_t t = 0; t < 13; ++t)
    for (int64_t c = 0; c < 5; ++c) {
      const double v = x.item_as_double(t * 5 + c), s = std::sin(v * std::exp(alpha.item_as_double(c)));
      want.push_back(v + s * s / (std::exp(beta.item_as_double(c)) + 1e-9));
    }
  EXPECT_TRUE(all_close(y, want, 1e-5, 1e-6));
}

TEST(OpsSpeech, ElementwiseHelpers) {
  std::mt19937 rng(5);
  const Tensor x = random_f32({4, 3}, rng, -4.0f, 4.0f);
  const Tensor scale = random_f32({3}, rng);
  Tensor scaled = x.clone();
  ops::scale_columns_(scaled, scale);
  Tensor silu = Tensor::empty({4, 3}, DType::F32);
  ops::silu_forward(x, silu);
  const Tensor gate = random_f32({4, 1}, rng, -2.0f, 2.0f), src = random_f32({4, 3}, rng);
  Tensor gated = x.clone();
  ops::sigmoid_gated_add_(gated, gate, src);
  Tensor clamped = x.clone();
  ops::clamp_(clamped, -1.0f, 1.0f);
  Doubles want_scaled, want_silu, want_gated, want_clamped;
  for (int64_t i = 0; i < 12; ++i) {
    const double v = x.item_as_double(i);
    want_scaled.push_back(v * scale.item_as_double(i % 3));
    want_silu.push_back(v / (1.0 + std::exp(-v)));
    want_gated.push_back(v + src.item_as_double(i) / (1.0 + std::exp(-gate.item_as_double(i / 3))));
    want_clamped.push_back(std::min(1.0, std::max(-1.0, v)));
  }
  EXPECT_TRUE(all_close(scaled, want_scaled, 1e-6, 1e-7));
  EXPECT_TRUE(all_close(silu, want_silu, 1e-6, 1e-7));
  EXPECT_TRUE(all_close(gated, want_gated, 1e-6, 1e-7));
  EXPECT_TRUE(all_close(clamped, want_clamped, 0, 0));
}

// Softmax attention of query i over keys (i - window, i], GQA heads, in double.
Doubles naive_window_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t window, double scale) {
  const int64_t s = q.dim(0), hq = q.dim(1), d = q.dim(2), hkv = k.dim(1);
  Doubles out(static_cast<size_t>(s * hq * d), 0.0);
  for (int64_t i = 0; i < s; ++i)
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t kh = h / (hq / hkv);
      std::vector<double> p;
      double total = 0;
      for (int64_t j = 0; j <= i; ++j) {
        if (i - j >= window) {
          p.push_back(0.0);
          continue;
        }
        double dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += q.item_as_double((i * hq + h) * d + e) * k.item_as_double((j * hkv + kh) * d + e);
        p.push_back(std::exp(dot * scale));
        total += p.back();
      }
      for (int64_t j = 0; j <= i; ++j)
        for (int64_t e = 0; e < d; ++e)
          out[static_cast<size_t>((i * hq + h) * d + e)] +=
              p[static_cast<size_t>(j)] / total * v.item_as_double((j * hkv + kh) * d + e);
    }
  return out;
}

TEST(OpsSpeech, SlidingWindowAttentionMatchesNaiveAndFullCausalWhenWide) {
  std::mt19937 rng(9);
  const int64_t s = 11, hq = 4, hkv = 2, d = 6;
  const Tensor q = random_f32({s, hq, d}, rng), k = random_f32({s, hkv, d}, rng), v = random_f32({s, hkv, d}, rng);
  const float scale = 0.4f;
  Tensor out = Tensor::empty({s, hq, d}, DType::F32);
  for (int64_t window : {1, 3, 5}) {
    ops::sliding_window_attention_forward(q, k, v, window, scale, out);
    EXPECT_TRUE(all_close(out, naive_window_attention(q, k, v, window, scale), 1e-5, 1e-6)) << "window " << window;
  }
  // A window of the whole sequence is plain causal attention.
  ops::sliding_window_attention_forward(q, k, v, s, scale, out);
  Tensor causal = Tensor::empty({s, hq, d}, DType::F32), lse = Tensor::empty({hq, s}, DType::F32);
  Tensor k_rep = Tensor::empty({s, hq, d}, DType::F32), v_rep = Tensor::empty({s, hq, d}, DType::F32);
  for (int64_t t = 0; t < s; ++t)
    for (int64_t h = 0; h < hq; ++h)
      for (int64_t e = 0; e < d; ++e) {
        k_rep.data<float>()[(t * hq + h) * d + e] = k.data<float>()[(t * hkv + h / 2) * d + e];
        v_rep.data<float>()[(t * hq + h) * d + e] = v.data<float>()[(t * hkv + h / 2) * d + e];
      }
  ops::attention_forward(q, k_rep, v_rep, {0, static_cast<int32_t>(s)}, true, scale, causal, lse);
  EXPECT_TRUE(all_close(out, test_ops::to_doubles(causal), 1e-5, 1e-6));
  EXPECT_THROW(ops::sliding_window_attention_forward(q, k, v, 0, scale, out), Error);
}

}  // namespace
}  // namespace veomni
