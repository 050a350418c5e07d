// The talker's prompt from chat turns and a reply (transformers' generate(return_audio=True) layout, row by row),
// its errors, and the talker's sampled codec loop (repetition penalty, suppressed tokens, seeded streams).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "generate/sampling.h"
#include "generate/talker_prompt.h"
#include "kernels/ops.h"
#include "model/talker/speech_common.h"
#include "model/talker/talker.h"
#include "tests/common/expect_error.h"
#include "tests/unit/speech_test_util.h"
#include "tests/unit/test_ops_util.h"

namespace veomni {
namespace {

constexpr int64_t kNewline = 198;

OmniSpeechIds tiny_ids() {
  return omni_speech_ids_from_json(
      {{"im_start_token_id", 900}, {"im_end_token_id", 901}, {"system_token_id", 902}, {"user_token_id", 903},
       {"assistant_token_id", 904}, {"tts_pad_token_id", 905}, {"tts_bos_token_id", 906}, {"tts_eos_token_id", 907},
       {"thinker_config", {{"audio_token_id", 910}, {"image_token_id", 911}, {"video_token_id", 912}}}},
      "tiny config");
}

Tensor random_prompt_rows(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  return test_ops::random_f32({rows, cols}, rng);
}

void expect_rows_near(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<float> a = got.to_float_vector(), b = want.clone().to_float_vector();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5f * (1 + std::fabs(b[i]))) << what << " " << i;
}

Tensor sum(const Tensor& a, const Tensor& b) {
  Tensor out = a.clone();
  ops::add_(out, b);
  return out;
}

class TalkerPromptTest : public ::testing::Test {
 protected:
  // The tiny talker with its codec special tokens inside its vocabulary (the last 1024, as in the real model).
  static nlohmann::json tiny_json() {
    nlohmann::json j = speech_test::tiny_talker_json();
    j.update({{"codec_pad_id", 1081}, {"codec_bos_id", 1082}, {"codec_nothink_id", 1083}, {"codec_think_bos_id", 1084},
              {"codec_think_eos_id", 1085}});
    return j;
  }
  TalkerPromptTest() : config_(talker_config_from_json(tiny_json(), "tiny talker")), talker_(config_) {
    speech_test::randomize(talker_.store(), 23);
  }
  // <|im_start|>system\n 40 <|im_end|>\n <|im_start|>user\n 5 [mm] 6 <|im_end|>\n <|im_start|>assistant\n
  std::vector<int64_t> prompt(int64_t middle = 7) const {
    const OmniSpeechIds ids = tiny_ids();
    return {ids.im_start, ids.system, kNewline, 40, ids.im_end, kNewline, ids.im_start, ids.user, kNewline, 5,
            middle, 6, ids.im_end, kNewline, ids.im_start, ids.assistant, kNewline};
  }
  TalkerPrompt build(const std::vector<int64_t>& p, const std::vector<int64_t>& reply, const Tensor& embeds,
                     const Tensor& hidden = {}) const {
    return build_talker_prompt(talker_, tiny_ids(), 1080, p, reply, embeds, hidden, special_, "prompts.jsonl:3");
  }
  TalkerConfig config_;
  Talker talker_;
  Tensor special_ = random_prompt_rows(3, 24, 5);  // tts_bos, tts_eos, tts_pad thinker embeddings
};

TEST_F(TalkerPromptTest, UserTurnsThenTheAssistantOverCodecTokensThenTrailingText) {
  const std::vector<int64_t> p = prompt(), reply = {11, 12, 13, 901};
  const Tensor embeds = random_prompt_rows(20, 24, 1);  // 17 + 4 - 1 rows
  const TalkerPrompt t = build(p, reply, embeds);
  // The system turn (rows 0..5) is dropped; the user turn is rows 6..13; the assistant's 9 rows follow.
  ASSERT_EQ(t.prefill.shape(), (Shape{17, 16}));
  expect_rows_near(t.prefill.slice(0, 8), talker_.project_text(embeds.slice(6, 14)), "user turn");
  const Tensor assistant = talker_.project_text(embeds.slice(14, 20));
  const Tensor special = talker_.project_text(special_);
  const Tensor codec = talker_.embed_codec({config_.codec_nothink_id, config_.codec_think_bos_id,
                                            config_.codec_think_eos_id, 1080, config_.codec_pad_id,
                                            config_.codec_bos_id});
  expect_rows_near(t.prefill.slice(8, 11), assistant.slice(0, 3), "role rows over zeros");
  for (int64_t r = 0; r < 4; ++r)
    expect_rows_near(t.prefill.slice(11 + r, 12 + r), sum(special.slice(2, 3), codec.slice(r, r + 1)),
                     "tts_pad row " + std::to_string(r));
  expect_rows_near(t.prefill.slice(15, 16), sum(special.slice(0, 1), codec.slice(4, 5)), "tts_bos over codec pad");
  expect_rows_near(t.prefill.slice(16, 17), sum(assistant.slice(3, 4), codec.slice(5, 6)), "first reply token");
  // Trailing text: the reply's second and third tokens (the last, 901, has no row), then tts_eos.
  ASSERT_EQ(t.trailing_text.shape(), (Shape{3, 16}));
  expect_rows_near(t.trailing_text.slice(0, 2), assistant.slice(4, 6), "trailing reply");
  expect_rows_near(t.trailing_text.slice(2, 3), special.slice(1, 2), "tts_eos");
  expect_rows_near(t.tts_pad, special.slice(2, 3), "tts_pad");
}

TEST_F(TalkerPromptTest, MultimodalPlaceholdersTakeTheAcceptLayerThroughHiddenProjection) {
  const std::vector<int64_t> p = prompt(911), reply = {11, 12};
  EXPECT_TRUE(user_turns_hold_multimodal(tiny_ids(), p));
  EXPECT_FALSE(user_turns_hold_multimodal(tiny_ids(), prompt()));
  const Tensor embeds = random_prompt_rows(18, 24, 2), hidden = random_prompt_rows(18, 24, 3);
  const TalkerPrompt t = build(p, reply, embeds, hidden);
  expect_rows_near(t.prefill.slice(0, 4), talker_.project_text(embeds.slice(6, 10)), "text before");
  expect_rows_near(t.prefill.slice(4, 5), talker_.project_hidden(hidden.slice(10, 11)), "image placeholder");
  expect_rows_near(t.prefill.slice(5, 8), talker_.project_text(embeds.slice(11, 14)), "text after");
  EXPECT_EQ(t.trailing_text.dim(0), 1);  // only tts_eos: the reply's second token is its last
}

TEST_F(TalkerPromptTest, PromptsThatAreNotAnOpenAssistantTurnAreInputErrors) {
  const OmniSpeechIds ids = tiny_ids();
  const Tensor embeds = random_prompt_rows(8, 24, 4);
  veomni::testing::expect_input_error([&] { build({5, 6, 7, 8, 9, 10, 11}, {12, 13}, embeds); },
                              {"prompts.jsonl:3", "no <|im_start|>"});
  veomni::testing::expect_input_error(
      [&] { build({ids.im_start, ids.user, kNewline, 5, ids.im_end, kNewline, 7}, {12, 13}, embeds); },
      {"prompts.jsonl:3", "open assistant turn"});
  veomni::testing::expect_input_error(
      [&] { build({ids.im_start, 77, kNewline, ids.im_start, ids.assistant, kNewline, 7}, {12, 13}, embeds); },
      {"prompts.jsonl:3", "token 77 after <|im_start|> at position 0"});
  veomni::testing::expect_input_error(
      [&] { build({5, 6, 7, 8, 9, 10, ids.im_start}, {12, 13}, embeds); }, {"no role follows"});
}

TEST_F(TalkerPromptTest, AOneTokenReplyFailsTheRunNotTheInput) {
  const std::vector<int64_t> p = prompt();
  const Tensor embeds = random_prompt_rows(17, 24, 6);
  veomni::testing::expect_internal_error([&] { build(p, {901}, embeds); }, {"prompts.jsonl:3", "nothing to speak"});
}

// The talker's sampled loop.
class TalkerSamplingTest : public TalkerPromptTest {
 protected:
  Tensor prefill_ = random_prompt_rows(6, 16, 31), text_ = random_prompt_rows(2, 16, 32),
         pad_ = random_prompt_rows(1, 16, 33);
};

TEST_F(TalkerSamplingTest, GreedyWithoutPenaltyIsTheGreedyLoop) {
  TalkerSampling greedy;
  greedy.codec = SamplingOptions{};
  greedy.residual = SamplingOptions{};
  RandomStream random(1, 0);
  const Talker::Generation a = talker_.generate(prefill_, text_, pad_, 8, greedy, random);
  const Talker::Generation b = talker_.generate(prefill_, text_, pad_, 8);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.codes, b.codes);
}

TEST_F(TalkerSamplingTest, GreedyTokensAreTheArgmaxAfterTheRepetitionPenaltyAndSuppression) {
  TalkerSampling sampling;
  sampling.codec = SamplingOptions{.repetition_penalty = 3.0};
  sampling.residual = SamplingOptions{};
  RandomStream random(1, 0);
  const Talker::Generation g = talker_.generate(prefill_, text_, pad_, 8, sampling, random);
  Tensor seq = prefill_;
  for (size_t step = 0; step < g.tokens.size(); ++step) {
    const Talker::Output out = talker_.forward(seq);
    std::vector<float> logits = out.logits.select(seq.dim(0) - 1).clone().to_float_vector();
    apply_repetition_penalty(logits, std::vector<int64_t>(g.tokens.begin(), g.tokens.begin() + step), 3.0);
    int64_t best = -1;
    for (size_t i = 0; i < logits.size(); ++i)
      if (!config_.is_suppressed(static_cast<int64_t>(i)) && (best < 0 || logits[i] > logits[static_cast<size_t>(best)]))
        best = static_cast<int64_t>(i);
    ASSERT_EQ(g.tokens[step], best) << "step " << step;
    if (static_cast<int64_t>(step) == g.frames) break;
    const CodePredictor::Prediction p = talker_.code_predictor().predict(
        out.hidden.slice(seq.dim(0) - 1, seq.dim(0)), talker_.embed_codec({best}));
    Tensor next = p.codec_sum;
    ops::add_(next, step < 2 ? text_.slice(static_cast<int64_t>(step), static_cast<int64_t>(step) + 1) : pad_);
    seq = concat_rows(seq, next);
  }
}

TEST_F(TalkerSamplingTest, SamplingFollowsItsStream) {
  const TalkerSampling sampling;  // transformers' defaults: temperature 0.9, top_k 50; residuals top_p 0.8
  const auto run = [&](uint64_t seed) {
    RandomStream random(seed, 0);
    return talker_.generate(prefill_, text_, pad_, 6, sampling, random);
  };
  const Talker::Generation a = run(1), again = run(1);
  EXPECT_EQ(a.tokens, again.tokens);
  EXPECT_EQ(a.codes, again.codes);
  bool differs = false;
  for (uint64_t seed = 2; seed < 6 && !differs; ++seed) {
    const Talker::Generation other = run(seed);
    differs = other.tokens != a.tokens || other.codes != a.codes;
  }
  EXPECT_TRUE(differs) << "four other seeds drew the same codes";
  for (int64_t token : a.tokens) EXPECT_FALSE(config_.is_suppressed(token)) << token;
}

}  // namespace
}  // namespace veomni
