// The talker and its code predictor: config parsing, forward shapes and causality, greedy residual codes and the
// greedy codec loop against step-by-step recomputation, loading errors, and the transformers fixture
// (tests/fixtures/omni_speech, scripts/gen_omni_speech_fixtures.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "kernels/ops.h"
#include "model/talker/speech_common.h"
#include "model/talker/talker.h"
#include "model/weight_source.h"
#include "tests/common/expect_error.h"
#include "tests/common/hf_fixture.h"
#include "tests/common/scratch_dir.h"
#include "tests/unit/speech_test_util.h"
#include "tests/unit/test_ops_util.h"

namespace veomni {
namespace {

using speech_test::tiny_talker_json;

TalkerConfig tiny_talker_config() { return talker_config_from_json(tiny_talker_json(), "tiny talker"); }

TEST(TalkerConfig, ReadsTheToyOmniConfig) {
  const TalkerConfig c =
      load_talker_config(std::string(VEOMNI_FIXTURES_DIR) + "/veomni_toy_configs/qwen3omni_toy/config.json");
  EXPECT_EQ(c.text.hidden_size, 1024);
  EXPECT_EQ(c.text.num_experts, 8);
  EXPECT_EQ(c.text.num_experts_per_tok, 6);
  EXPECT_EQ(c.text.moe_intermediate_size, 384);
  EXPECT_TRUE(c.text.norm_topk_prob);
  EXPECT_EQ(c.shared_expert_intermediate_size, 768);
  EXPECT_EQ(c.text.vocab_size, 3072);
  EXPECT_EQ(c.code_predictor.num_hidden_layers, 5);
  EXPECT_EQ(c.code_predictor.vocab_size, 2048);
  EXPECT_EQ(c.code_predictor.num_key_value_heads, 8);
  EXPECT_EQ(c.num_code_groups, 16);
  EXPECT_EQ(c.thinker_hidden_size, 2048);
  EXPECT_EQ(c.accept_hidden_layer, 2);
  EXPECT_EQ(c.codec_eos_token_id, 2150);
  EXPECT_EQ(c.speaker_id.at("ethan"), 2302);
  EXPECT_EQ(c.mrope_section, (std::vector<int64_t>{24, 20, 20}));
  // Special codec tokens (the last 1024) are suppressed, except EOS.
  EXPECT_FALSE(c.is_suppressed(2047));
  EXPECT_TRUE(c.is_suppressed(2048));
  EXPECT_FALSE(c.is_suppressed(2150));
  EXPECT_TRUE(c.is_suppressed(2149));
}

TEST(TalkerConfig, RejectsMismatchedPredictorWidthAndMissingSharedExpert) {
  nlohmann::json j = tiny_talker_json();
  j["code_predictor_config"]["hidden_size"] = 32;
  veomni::testing::expect_input_error([&] { talker_config_from_json(j, "t"); }, {"code_predictor_config.hidden_size"});
  j = tiny_talker_json();
  j["text_config"].erase("shared_expert_intermediate_size");
  veomni::testing::expect_input_error([&] { talker_config_from_json(j, "t"); }, {"shared_expert_intermediate_size"});
  veomni::testing::expect_input_error(
      [&] { load_talker_config(std::string(VEOMNI_FIXTURES_DIR) + "/veomni_toy_configs/qwen3_moe_toy/config.json"); },
      {"has no talker"});
}

Tensor random_rows(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  return test_ops::random_f32({rows, cols}, rng);
}

class TalkerTest : public ::testing::Test {
 protected:
  TalkerTest() : config_(tiny_talker_config()), talker_(config_) { speech_test::randomize(talker_.store(), 17); }
  TalkerConfig config_;
  Talker talker_;
};

TEST(TalkerCachedStep, RowsAndPositionsOfOneSequence) {
  const CachedStep prompt = single_sequence_step(0, 3, 8, 4, 10000.0, Device::cpu());
  EXPECT_EQ(prompt.cu_seqlens, (std::vector<int32_t>{0, 3}));
  EXPECT_FALSE(prompt.one_token_each());
  const CachedStep step = single_sequence_step(5, 1, 8, 4, 10000.0, Device::cpu());
  EXPECT_TRUE(step.one_token_each());
  EXPECT_EQ(step.starts, (std::vector<int32_t>{5}));
  // Position 5's RoPE table row, as the uncached forward computes it for the sixth token.
  Tensor cos = Tensor::empty({6, 4}, DType::F32, Device::cpu()), sin = cos.clone();
  ops::rope_tables(arange_positions(6), 4, 10000.0, {}, cos, sin);
  EXPECT_EQ(step.cos.to_float_vector(), cos.slice(5, 6).clone().to_float_vector());
  EXPECT_EQ(step.sin.to_float_vector(), sin.slice(5, 6).clone().to_float_vector());
  EXPECT_THROW(single_sequence_step(7, 2, 8, 4, 10000.0, Device::cpu()), Error);  // past the cache's capacity
}

TEST_F(TalkerTest, ForwardShapesAndCausality) {
  const Tensor x = random_rows(7, 16, 1);
  const Talker::Output whole = talker_.forward(x);
  EXPECT_EQ(whole.logits.shape(), (Shape{7, 1100}));
  EXPECT_EQ(whole.hidden.shape(), (Shape{7, 16}));
  const Talker::Output head = talker_.forward(x.slice(0, 4));
  const std::vector<float> a = head.logits.to_float_vector(), b = whole.logits.slice(0, 4).clone().to_float_vector();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5f * (1 + std::fabs(b[i]))) << i;
  // 3-D positions all equal to the 1-D ones give the same result (text-only M-RoPE).
  std::vector<int64_t> pos3;
  for (int r = 0; r < 3; ++r)
    for (int64_t t = 0; t < 7; ++t) pos3.push_back(t);
  const Talker::Output mrope = talker_.forward(x, Tensor::from_vector(pos3, {3, 7}));
  EXPECT_EQ(mrope.logits.to_float_vector(), whole.logits.to_float_vector());
  veomni::testing::expect_input_error([&] { talker_.forward(random_rows(3, 15, 2)); }, {"expected [T > 0, 16]"});
}

TEST_F(TalkerTest, ProjectionsMapThinkerWidthToTalkerWidth) {
  const Tensor thinker = random_rows(5, 24, 3);
  EXPECT_EQ(talker_.project_text(thinker).shape(), (Shape{5, 16}));
  EXPECT_EQ(talker_.project_hidden(thinker).shape(), (Shape{5, 16}));
  EXPECT_NE(talker_.project_text(thinker).to_float_vector(), talker_.project_hidden(thinker).to_float_vector());
}

TEST_F(TalkerTest, CodePredictorIsGreedyOverItsOwnGroups) {
  const CodePredictor& predictor = talker_.code_predictor();
  ASSERT_EQ(predictor.groups(), 2);
  const Tensor h = random_rows(1, 16, 4);
  const Tensor first = talker_.embed_codec({7});
  const CodePredictor::Prediction p = predictor.predict(h, first);
  ASSERT_EQ(p.codes.size(), 2u);
  // Step by step: group 0 reads [h, first], group 1 reads [h, first, embed_0(code 0)].
  Tensor seq = concat_rows(h, first);
  Tensor hid = predictor.hidden(seq);
  EXPECT_EQ(p.codes[0], greedy_token(predictor.logits(hid.slice(1, 2), 0).select(0)));
  seq = concat_rows(seq, predictor.embed({p.codes[0]}, 0));
  hid = predictor.hidden(seq);
  EXPECT_EQ(p.codes[1], greedy_token(predictor.logits(hid.slice(2, 3), 1).select(0)));
  // codec_sum = first + embed_0(c0) + embed_1(c1).
  Tensor sum = first.clone();
  ops::add_(sum, predictor.embed({p.codes[0]}, 0));
  ops::add_(sum, predictor.embed({p.codes[1]}, 1));
  EXPECT_EQ(p.codec_sum.to_float_vector(), sum.to_float_vector());
}

TEST_F(TalkerTest, GreedyGenerationFeedsBackCodesAndTrailingText) {
  const Tensor prefill = random_rows(5, 16, 5), text = random_rows(2, 16, 6), pad = random_rows(1, 16, 7);
  const Talker::Generation g = talker_.generate(prefill, text, pad, 6);
  ASSERT_FALSE(g.tokens.empty());
  EXPECT_EQ(g.frames, static_cast<int64_t>(g.tokens.size()) - 1);  // the last token is never fed back
  EXPECT_EQ(static_cast<int64_t>(g.codes.size()), g.frames * config_.num_code_groups);
  // Replay: every token is the unsuppressed argmax of the sequence built from the previous steps.
  Tensor seq = prefill;
  for (int64_t step = 0; step < static_cast<int64_t>(g.tokens.size()); ++step) {
    const Talker::Output out = talker_.forward(seq);
    const int64_t token = greedy_token(out.logits.select(seq.dim(0) - 1),
                                       [&](int64_t t) { return config_.is_suppressed(t); });
    ASSERT_EQ(token, g.tokens[static_cast<size_t>(step)]) << "step " << step;
    EXPECT_FALSE(config_.is_suppressed(token));
    if (step == g.frames) break;
    EXPECT_EQ(g.codes[static_cast<size_t>(step * config_.num_code_groups)], token);
    const CodePredictor::Prediction p = talker_.code_predictor().predict(
        out.hidden.slice(seq.dim(0) - 1, seq.dim(0)), talker_.embed_codec({token}));
    for (size_t r = 0; r < p.codes.size(); ++r)
      EXPECT_EQ(g.codes[static_cast<size_t>(step * config_.num_code_groups) + 1 + r], p.codes[r]);
    Tensor next = p.codec_sum;
    ops::add_(next, step < 2 ? text.slice(step, step + 1) : pad);
    seq = concat_rows(seq, next);
  }
  if (!g.reached_eos) {
    EXPECT_EQ(g.tokens.size(), 6u);
  }
}

class TalkerLoad : public veomni::testing::ScratchDir {};

TEST_F(TalkerLoad, AMissingTalkerTensorNamesTheTensorAndTheFile) {
  const TalkerConfig c = tiny_talker_config();
  Talker model(c);
  speech_test::randomize(model.store(), 9);
  const std::string missing = "talker.model.layers.1.mlp.shared_expert_gate.weight";
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& p : model.store().all())
    if (p->name != missing) tensors.emplace_back(p->name, p->value.clone());
  const std::string file = path("model.safetensors");
  write_safetensors(file, tensors);
  Talker loaded(c);
  veomni::testing::expect_input_error([&] { loaded.load(HfCheckpointSource(file)); }, {missing, "model.safetensors"});
  tensors.emplace_back(missing, model.store().at(missing).value.clone());
  write_safetensors(file, tensors);
  loaded.load(HfCheckpointSource(file));
  const Tensor x = random_rows(3, 16, 8);
  EXPECT_EQ(loaded.forward(x).logits.to_float_vector(), model.forward(x).logits.to_float_vector());
}

// ---------------------------------------------------------------- transformers fixture

std::string talker_fixture_dir() { return std::string(VEOMNI_FIXTURES_DIR) + "/omni_speech"; }

std::vector<int64_t> talker_int_vector(const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = static_cast<int64_t>(t.item_as_double(i));
  return out;
}

class TalkerHfFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = talker_fixture_dir();
    if (!std::filesystem::exists(dir_))
      GTEST_SKIP() << "no fixture tests/fixtures/omni_speech: generate it with scripts/gen_omni_speech_fixtures.py "
                      "(torch + transformers 5.17)";
    for (const char* file : {"config.json", "model.safetensors", "inputs.safetensors", "expected.safetensors"})
      ASSERT_TRUE(std::filesystem::exists(dir_ + "/" + file)) << "incomplete fixture: no " << dir_ << "/" << file;
    talker_ = std::make_unique<Talker>(load_talker_config(dir_));
    talker_->load(HfCheckpointSource(dir_));
    inputs_ = std::make_unique<SafetensorsReader>(dir_ + "/inputs.safetensors");
    expected_ = std::make_unique<SafetensorsReader>(dir_ + "/expected.safetensors");
  }
  std::string dir_;
  std::unique_ptr<Talker> talker_;
  std::unique_ptr<SafetensorsReader> inputs_, expected_;
};

constexpr double kTalkerRelTol = 1e-4;

TEST_F(TalkerHfFixture, ProjectionsMatchTransformers) {
  const Tensor thinker_embeds = inputs_->read("talker.thinker_embeds");
  const Tensor thinker_hidden = inputs_->read("talker.thinker_hidden");
  EXPECT_LE(
      veomni::testing::relative_error(talker_->project_text(thinker_embeds), expected_->read("talker.text_projection")),
      kTalkerRelTol);
  EXPECT_LE(veomni::testing::relative_error(talker_->project_hidden(thinker_hidden),
                                            expected_->read("talker.hidden_projection")),
            kTalkerRelTol);
}

TEST_F(TalkerHfFixture, ForwardMatchesTransformers) {
  const Talker::Output out = talker_->forward(inputs_->read("talker.inputs_embeds"));
  const double logits_err = veomni::testing::relative_error(out.logits, expected_->read("talker.logits"));
  const double hidden_err = veomni::testing::relative_error(out.hidden, expected_->read("talker.hidden"));
  EXPECT_LE(logits_err, kTalkerRelTol) << "codec logits";
  EXPECT_LE(hidden_err, kTalkerRelTol) << "final hidden states";
  std::printf("[talker] logits rel err %.3g, hidden rel err %.3g\n", logits_err, hidden_err);
}

TEST_F(TalkerHfFixture, CodePredictorMatchesTransformers) {
  const CodePredictor& predictor = talker_->code_predictor();
  // The full teacher-forced sequence [talker hidden, embed(code 0), embed_0(code 1), ...]: row g + 1 of its hidden
  // states gives group g's logits.
  const Tensor sequence = inputs_->read("code_predictor.inputs_embeds");
  const Tensor hidden = predictor.hidden(sequence);
  const Tensor want = expected_->read("code_predictor.logits");  // [groups, vocab]
  ASSERT_EQ(want.dim(0), predictor.groups());
  double worst = 0;
  for (int64_t g = 0; g < predictor.groups(); ++g)
    worst = std::max(worst,
                     veomni::testing::relative_error(predictor.logits(hidden.slice(g + 1, g + 2), g), want.select(g)));
  EXPECT_LE(worst, kTalkerRelTol) << "residual-group logits";
  // Greedy residual codes from the first two rows.
  const CodePredictor::Prediction p = predictor.predict(sequence.slice(0, 1), sequence.slice(1, 2));
  EXPECT_EQ(p.codes, talker_int_vector(expected_->read("code_predictor.greedy_codes")));
  std::printf("[code_predictor] worst logits rel err %.3g\n", worst);
}

TEST_F(TalkerHfFixture, GreedyCodesMatchTransformers) {
  const Tensor want_codes = expected_->read("talker.greedy_codes");  // [frames, num_code_groups] i64
  const int64_t max_new = static_cast<int64_t>(expected_->read("talker.max_new_tokens").item_as_double(0));
  const Talker::Generation g = talker_->generate(inputs_->read("talker.inputs_embeds"),
                                                 inputs_->read("talker.trailing_text_hidden"),
                                                 inputs_->read("talker.tts_pad_embed"), max_new);
  EXPECT_EQ(g.tokens, talker_int_vector(expected_->read("talker.greedy_tokens")));
  EXPECT_EQ(g.frames, want_codes.dim(0));
  EXPECT_EQ(g.codes, talker_int_vector(want_codes));
}

}  // namespace
}  // namespace veomni
