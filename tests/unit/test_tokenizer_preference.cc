// Preference pairs on the real tokenizer: exact ids and labels of both sides, the two record layouts agreeing,
// prompts (even with assistant turns) never trained, and the stored sample's keys.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/dataset_objective_keys.h"
#include "data/text_preprocess_preference.h"
#include "test_tokenizer_util.h"

namespace veomni {
namespace {

using json = nlohmann::json;
using V = std::vector<int64_t>;
using veomni::testing::X;

// <|im_start|>user\nHello world<|im_end|>\n then <|im_start|>assistant\n{answer}<|im_end|>\n.
const V kChosenIds = {151644, 872,  198,   9707, 1879, 151645, 198, 151644, 77091,  198,
                      108386, 3837, 99489, 6313, 220,  16,     17,  18,     151645, 198};
const V kChosenLabels = {X, X, X, X, X, X, X, X, X, X, 108386, 3837, 99489, 6313, 220, 16, 17, 18, 151645, X};
const V kRejectedIds = {151644, 872, 198, 9707, 1879, 151645, 198, 151644, 77091, 198, 9707, 1879, 151645, 198};
const V kRejectedLabels = {X, X, X, X, X, X, X, X, X, X, 9707, 1879, 151645, X};

const json kUser = {{"role", "user"}, {"content", "Hello world"}};
const json kChosenMessage = {{"role", "assistant"}, {"content", "你好，世界！ 123"}};
const json kRejected = {{"role", "assistant"}, {"content", "Hello world"}};

V id_values(const Tensor& t) { return {t.data<int64_t>(), t.data<int64_t>() + t.numel()}; }

V concat_ids(V a, const V& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(TokenizerPreference, BothLayoutsGiveTheSameLabelledPair) {
  const Tokenizer* tokenizer = veomni::testing::qwen3_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const PairEncoder encoder(*tokenizer, {});
  const json shared = {{"chosen", {kUser, kChosenMessage}}, {"rejected", {kUser, kRejected}}};
  const json explicit_prompt = {{"prompt", {kUser}}, {"chosen", {kChosenMessage}}, {"rejected", {kRejected}},
                                {"ref_chosen_logps", -3.5}, {"ref_rejected_logps", -7}};
  // ultrafeedback_binarized: whole conversations beside a string "prompt" (the first user turn's text).
  const json ultrafeedback = {
      {"prompt", "Hello world"}, {"chosen", {kUser, kChosenMessage}}, {"rejected", {kUser, kRejected}}};
  for (const json& record : {shared, explicit_prompt, ultrafeedback}) {
    const Sample s = preference_sample(encoder.encode_record(record));
    EXPECT_EQ(id_values(s.at("input_ids")), concat_ids(kChosenIds, kRejectedIds));
    EXPECT_EQ(id_values(s.at("labels")), concat_ids(kChosenLabels, kRejectedLabels));
    V positions;
    for (int64_t i = 0; i < 20; ++i) positions.push_back(i);
    for (int64_t i = 0; i < 14; ++i) positions.push_back(i);
    EXPECT_EQ(id_values(s.at("position_ids")), positions);
    EXPECT_EQ(id_values(s.at(kChosenLengthKey)), V{20});
    EXPECT_EQ(id_values(s.at("attention_mask")), V(34, 1));
    EXPECT_EQ(s.count(kRefChosenLogpsKey), record.contains("ref_chosen_logps") ? 1u : 0u);
  }
  const Sample with_ref = preference_sample(encoder.encode_record(explicit_prompt));
  EXPECT_EQ(with_ref.at(kRefChosenLogpsKey).data<float>()[0], -3.5f);
  EXPECT_EQ(with_ref.at(kRefRejectedLogpsKey).data<float>()[0], -7.0f);
}

TEST(TokenizerPreference, AssistantTurnsOfThePromptAreNotTrained) {
  const Tokenizer* tokenizer = veomni::testing::qwen3_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const PairEncoder encoder(*tokenizer, {});
  const json earlier = {{"role", "assistant"}, {"content", "Hi"}};
  const json record = {{"chosen", {kUser, earlier, kUser, kChosenMessage}},
                       {"rejected", {kUser, earlier, kUser, kRejected}}};
  const EncodedPair pair = encoder.encode_record(record);
  // Only the answers train: 9 targets on the chosen side, 3 on the rejected one.
  EXPECT_EQ(pair.chosen.trained_count(), 9);
  EXPECT_EQ(pair.rejected.trained_count(), 3);
}

TEST(TokenizerPreference, SystemPromptAndLengthLimit) {
  const Tokenizer* tokenizer = veomni::testing::qwen3_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const json record = {{"prompt", {kUser}}, {"chosen", {kChosenMessage}}, {"rejected", {kRejected}}};
  const PairEncoder with_system(*tokenizer, {.system_prompt = "Hello world", .max_seq_len = 0});
  const EncodedPair pair = with_system.encode_record(record);
  EXPECT_EQ(pair.chosen.ids[1], 8948);  // "system"
  EXPECT_EQ(pair.rejected.ids[1], 8948);
  const PairEncoder limited(*tokenizer, {.system_prompt = std::nullopt, .max_seq_len = 33});
  EXPECT_EQ(limited.encode_value(record).status, PairStatus::TooLong);
  const PairEncoder enough(*tokenizer, {.system_prompt = std::nullopt, .max_seq_len = 34});
  EXPECT_EQ(enough.encode_value(record).status, PairStatus::Kept);
  EXPECT_EQ(enough.encode_line("{\"chosen\": []").status, PairStatus::Bad);
}

}  // namespace
}  // namespace veomni
