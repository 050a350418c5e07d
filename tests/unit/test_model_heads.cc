// Unit tests of the heads on a model body: the LM head's label log-probs against its cross-entropy and finite
// differences, the value head's values and gradients, their parameters in the FSDP head group, and the body
// interface's saved values.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/ops.h"
#include "model/causal_lm.h"
#include "model/heads/lm_head.h"
#include "model/heads/value_head.h"
#include "test_model_util.h"
#include "test_ops_util.h"

using namespace veomni;
using veomni::test_ops::expect_gradient;
using veomni::test_ops::random_f32;

namespace {

constexpr int64_t kTokens = 7;

// Targets of kTokens rows, two of them ignored.
Tensor some_targets(int64_t vocab) {
  std::vector<int64_t> t{3, kIgnoreIndex, 11, 0, vocab - 1, kIgnoreIndex, 7};
  return Tensor::from_vector(t, {kTokens});
}

// Gradients of every parameter, by name (undefined gradients as empty).
std::map<std::string, std::vector<float>> grads(ParamStore& store) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& p : store.all()) out[p->name] = p->grad.defined() ? p->grad.to_float_vector() : std::vector<float>{};
  return out;
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, double rtol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = 1e-12;
  for (float x : b) scale = std::max(scale, static_cast<double>(std::fabs(x)));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], rtol * scale) << what << " element " << i;
}

struct LmFixture {
  ModelConfig config = test::tiny_dense_config(false);
  TextBody body{config, ModelOptions{}};
  LmHead head{body.head_site(), config, "lm_head.weight"};
  Tensor hidden;
  Tensor targets = some_targets(config.vocab_size);

  LmFixture() {
    body.init_weights(5);
    std::mt19937 rng(3);
    hidden = random_f32({kTokens, config.hidden_size}, rng, -2.0f, 2.0f);
  }
};

TEST(LmHeadLogprobs, AreMinusTheTokenCrossEntropiesAndZeroWhereIgnored) {
  LmFixture f;
  Tensor logits;
  const LmHead::LossOutput loss = f.head.loss_forward(f.hidden, f.targets, false, &logits);
  const LmHead::LogprobOutput lp = f.head.logprobs_forward(f.hidden, f.targets, false);
  ASSERT_EQ(lp.logprobs.shape(), (Shape{kTokens}));
  EXPECT_EQ(lp.logprobs.dtype(), DType::F32);
  double sum = 0;
  for (int64_t t = 0; t < kTokens; ++t) {
    const int64_t label = static_cast<int64_t>(f.targets.item_as_double(t));
    const double got = lp.logprobs.item_as_double(t);
    sum += got;
    if (label == kIgnoreIndex) {
      EXPECT_EQ(got, 0.0) << t;
      EXPECT_FALSE(std::signbit(got)) << t;
      continue;
    }
    const int64_t vocab = f.config.vocab_size;
    double max = -INFINITY, z = 0;
    for (int64_t v = 0; v < vocab; ++v) max = std::max(max, logits.item_as_double(t * vocab + v));
    for (int64_t v = 0; v < vocab; ++v) z += std::exp(logits.item_as_double(t * vocab + v) - max);
    const double want = logits.item_as_double(t * vocab + label) - max - std::log(z);
    EXPECT_NEAR(got, want, 1e-5) << t;
  }
  EXPECT_NEAR(sum, -loss.ce_sum, 1e-5);
  EXPECT_EQ(loss.valid_tokens, 5);
  EXPECT_FALSE(lp.saved.logits.defined());  // save = false keeps nothing
}

// d(logprob) = -c on every token is d(ce_sum) = c: the two backward paths give the same gradients.
TEST(LmHeadLogprobs, BackwardOfAUniformWeightEqualsTheCrossEntropyBackward) {
  LmFixture f;
  ParamStore& store = f.body.params();
  store.zero_grads();
  LmHead::LossOutput loss = f.head.loss_forward(f.hidden, f.targets, true);
  const Tensor dh_loss = f.head.loss_backward(std::move(loss.saved), 0.25f);
  const auto loss_grads = grads(store);

  store.zero_grads();
  LmHead::LogprobOutput lp = f.head.logprobs_forward(f.hidden, f.targets, true);
  const Tensor dh_lp = f.head.logprobs_backward(std::move(lp.saved), Tensor::full<float>({kTokens}, -0.25f));
  const auto lp_grads = grads(store);

  expect_close(dh_lp.to_float_vector(), dh_loss.to_float_vector(), 1e-6, "d(hidden)");
  for (const char* name : {"lm_head.weight", "model.norm.weight"})
    expect_close(lp_grads.at(name), loss_grads.at(name), 1e-6, name);
}

// sum_t w_t logprob_t: d(hidden), d(lm_head) and d(model.norm) against central differences.
TEST(LmHeadLogprobs, GradientsMatchFiniteDifferences) {
  LmFixture f;
  std::mt19937 rng(9);
  const Tensor w = random_f32({kTokens}, rng);
  auto objective = [&] { return test_ops::project(f.head.logprobs_forward(f.hidden, f.targets, false).logprobs, w); };
  ParamStore& store = f.body.params();
  store.zero_grads();
  LmHead::LogprobOutput lp = f.head.logprobs_forward(f.hidden, f.targets, true);
  const Tensor dh = f.head.logprobs_backward(std::move(lp.saved), w);
  expect_gradient("hidden", f.hidden, dh, objective);
  expect_gradient("lm_head.weight", store.at("lm_head.weight").value, store.at("lm_head.weight").grad, objective);
  expect_gradient("model.norm.weight", store.at("model.norm.weight").value, store.at("model.norm.weight").grad,
                  objective);
}

// sum_t (w_t logprob_t + u_t entropy_t): the entropy's gradient (PPO's entropy bonus) through the head as well.
TEST(LmHeadLogprobs, EntropyGradientsMatchFiniteDifferences) {
  LmFixture f;
  std::mt19937 rng(10);
  const Tensor w = random_f32({kTokens}, rng);
  const Tensor u = random_f32({kTokens}, rng);
  auto objective = [&] {
    const LmHead::LogprobOutput lp = f.head.logprobs_forward(f.hidden, f.targets, false, true);
    return test_ops::project(lp.logprobs, w) + test_ops::project(lp.entropy, u);
  };
  ParamStore& store = f.body.params();
  store.zero_grads();
  LmHead::LogprobOutput lp = f.head.logprobs_forward(f.hidden, f.targets, true, true);
  ASSERT_TRUE(lp.entropy.defined());
  const Tensor dh = f.head.logprobs_backward(std::move(lp.saved), w, u);
  expect_gradient("hidden", f.hidden, dh, objective);
  expect_gradient("lm_head.weight", store.at("lm_head.weight").value, store.at("lm_head.weight").grad, objective);
}

TEST(LmHeadLogprobs, BackwardWithoutSavedForwardIsAnInternalError) {
  LmFixture f;
  LmHead::LogprobOutput lp = f.head.logprobs_forward(f.hidden, f.targets, false);
  EXPECT_THROW(f.head.logprobs_backward(std::move(lp.saved), Tensor::zeros({kTokens}, DType::F32)), Error);
}

struct ValueFixture {
  ModelConfig config = test::tiny_dense_config(false);
  TextBody body{config, ModelOptions{}};
  ValueHead head;
  Tensor hidden;

  explicit ValueFixture(bool bias) : head(body.head_site(), config, bias) {
    body.init_weights(5);
    if (bias) ops::fill_(head.bias()->value, 0.3f);
    std::mt19937 rng(4);
    hidden = random_f32({kTokens, config.hidden_size}, rng, -2.0f, 2.0f);
  }
};

TEST(ValueHead, RegistersScoreInTheHeadGroup) {
  ValueFixture with_bias(true), without(false);
  const ParamGroup& head = with_bias.body.params().groups().back();
  EXPECT_EQ(head.name, "head");
  ASSERT_EQ(head.params.size(), 3u);
  EXPECT_EQ(head.params[0]->name, "model.norm.weight");
  EXPECT_EQ(head.params[1]->name, "score.weight");
  EXPECT_EQ(head.params[1]->shape, (Shape{1, 16}));
  EXPECT_EQ(head.params[2]->name, "score.bias");
  EXPECT_EQ(head.params[2]->shape, (Shape{1}));
  EXPECT_EQ(without.body.params().groups().back().params.size(), 2u);  // sequence classification: no bias
  EXPECT_EQ(without.body.params().find("lm_head.weight"), nullptr);
}

TEST(ValueHead, InitialisedAsTransformersDoesNormalWeightZeroBias) {
  ModelConfig config = test::tiny_dense_config(false);
  TextBody body{config, ModelOptions{}};
  ValueHead head(body.head_site(), config, true);
  body.init_weights(5);
  EXPECT_EQ(head.bias()->value.to_float_vector(), std::vector<float>{0.0f});
  double sum_sq = 0;
  for (float w : body.params().find("score.weight")->value.to_float_vector()) sum_sq += static_cast<double>(w) * w;
  EXPECT_GT(sum_sq, 0.0);
}

TEST(ValueHead, ValuesAreTheNormedHiddenStatesDotScorePlusBias) {
  ValueFixture f(true);
  const Tensor values = f.head.forward(f.hidden, false).values;
  ASSERT_EQ(values.shape(), (Shape{kTokens}));
  const int64_t d = f.config.hidden_size;
  const Tensor& norm = f.body.params().at("model.norm.weight").value;
  const Tensor& score = f.head.weight().value;
  for (int64_t t = 0; t < kTokens; ++t) {
    double ms = 0;
    for (int64_t j = 0; j < d; ++j) ms += std::pow(f.hidden.item_as_double(t * d + j), 2);
    const double rstd = 1.0 / std::sqrt(ms / static_cast<double>(d) + f.config.rms_norm_eps);
    double want = 0.3;
    for (int64_t j = 0; j < d; ++j)
      want += f.hidden.item_as_double(t * d + j) * rstd * norm.item_as_double(j) * score.item_as_double(j);
    EXPECT_NEAR(values.item_as_double(t), want, 1e-5) << t;
  }
}

TEST(ValueHead, GradientsMatchFiniteDifferences) {
  for (bool bias : {true, false}) {
    ValueFixture f(bias);
    std::mt19937 rng(11);
    const Tensor w = random_f32({kTokens}, rng);
    auto objective = [&] { return test_ops::project(f.head.forward(f.hidden, false).values, w); };
    ParamStore& store = f.body.params();
    store.zero_grads();
    ValueHead::Output out = f.head.forward(f.hidden, true);
    const Tensor dh = f.head.backward(std::move(out.saved), w);
    expect_gradient("hidden", f.hidden, dh, objective);
    expect_gradient("score.weight", f.head.weight().value, f.head.weight().grad, objective);
    expect_gradient("model.norm.weight", store.at("model.norm.weight").value, store.at("model.norm.weight").grad,
                    objective);
    if (bias) {
      double sum_w = 0;
      for (int64_t t = 0; t < kTokens; ++t) sum_w += w.item_as_double(t);
      EXPECT_NEAR(f.head.bias()->grad.item_as_double(0), sum_w, 1e-5);
    }
  }
}

// Forward returns its saved values (none without save); backward consumes them, and refuses another body's.
TEST(ModelBody, ForwardReturnsWhatBackwardConsumes) {
  const ModelConfig config = test::tiny_dense_config(false);
  TextBody body(config, ModelOptions{});
  body.init_weights(1);
  MultimodalBatch batch;
  batch.text = test::packed_batch({5, 4}, config.vocab_size, 2);
  BodyOutput plain = body.forward(batch, false);
  EXPECT_EQ(plain.hidden.shape(), (Shape{9, config.hidden_size}));
  EXPECT_EQ(plain.saved, nullptr);
  EXPECT_THROW(body.backward(std::move(plain.saved), plain.hidden, 0.0f), Error);
  struct OtherSaved final : BodySaved {};
  EXPECT_THROW(body.backward(std::make_unique<OtherSaved>(), plain.hidden, 0.0f), Error);

  BodyOutput kept = body.forward(batch, true);
  ASSERT_NE(kept.saved, nullptr);
  EXPECT_EQ(kept.hidden.shape(), plain.hidden.shape());
  body.params().zero_grads();
  body.backward(std::move(kept.saved), Tensor::full<float>({9, config.hidden_size}, 0.5f), 0.0f);
  EXPECT_TRUE(body.params().at("model.embed_tokens.weight").grad.defined());
}

}  // namespace
