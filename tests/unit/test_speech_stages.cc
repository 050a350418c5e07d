// The stage file of veomni-generate (--stages): defaults, every key, and the errors that name the file and the key.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "generate/speech_stages.h"
#include "tests/common/expect_error.h"

namespace veomni {
namespace {

TEST(SpeechStages, DefaultsAreTheThinkerAloneAndTransformersTalkerSampling) {
  const SpeechStages s = speech_stages_from_yaml("", "empty.yaml");
  EXPECT_EQ(s.stages, (std::vector<std::string>{"thinker"}));
  EXPECT_EQ(s.speaker, "Ethan");
  EXPECT_EQ(s.source, "empty.yaml");
  EXPECT_DOUBLE_EQ(s.talker.temperature, 0.9);
  EXPECT_EQ(s.talker.top_k, 50);
  EXPECT_DOUBLE_EQ(s.talker.repetition_penalty, 1.05);
  EXPECT_EQ(s.talker.max_new_tokens, 4096);
  EXPECT_DOUBLE_EQ(s.talker.code_predictor.top_p, 0.8);
  EXPECT_EQ(s.code2wav.chunk_size, 300);
  EXPECT_EQ(s.code2wav.left_context, 25);
  EXPECT_TRUE(s.runs("thinker"));
  EXPECT_FALSE(s.runs("talker"));
  // Keys left out keep the base's values (veomni-generate's base runs every stage with --audio-out).
  SpeechStages base;
  base.stages = speech_stage_names();
  EXPECT_TRUE(speech_stages_from_yaml("speaker: aiden", "s.yaml", base).runs("code2wav"));
}

TEST(SpeechStages, ReadsEveryStageSection) {
  const SpeechStages s = speech_stages_from_yaml(R"(
stages: [thinker, talker, code2wav]
speaker: Chelsie
thinker: {device: cpu, max_new_tokens: 12, temperature: 0.7, top_k: 20, top_p: 0.9, repetition_penalty: 1.1, seed: 4}
talker:
  device: cuda
  max_new_tokens: 100
  temperature: 0
  top_k: 10
  top_p: 0.5
  repetition_penalty: 1.2
  seed: 9
  code_predictor: {temperature: 0, top_k: 5, top_p: 0.6}
code2wav: {device: cuda, chunk_size: 50, left_context: 0}
)", "full.yaml");
  EXPECT_EQ(s.stages, speech_stage_names());
  EXPECT_EQ(s.speaker, "Chelsie");
  EXPECT_EQ(s.thinker.max_new_tokens, 12);
  const SamplingOptions thinker = thinker_sampling(s.thinker);
  EXPECT_DOUBLE_EQ(thinker.temperature, 0.7);
  EXPECT_EQ(thinker.top_k, 20);
  EXPECT_DOUBLE_EQ(thinker.top_p, 0.9);
  EXPECT_DOUBLE_EQ(thinker.repetition_penalty, 1.1);
  EXPECT_EQ(thinker.seed, 4u);
  EXPECT_EQ(s.talker.device, "cuda");
  EXPECT_EQ(s.talker.max_new_tokens, 100);
  const SamplingOptions codec = talker_codec_sampling(s.talker);
  EXPECT_TRUE(codec.greedy());
  EXPECT_EQ(codec.top_k, 10);
  EXPECT_DOUBLE_EQ(codec.repetition_penalty, 1.2);
  EXPECT_EQ(codec.seed, 9u);
  const SamplingOptions residual = code_predictor_sampling(s.talker.code_predictor);
  EXPECT_TRUE(residual.greedy());
  EXPECT_EQ(residual.top_k, 5);
  EXPECT_DOUBLE_EQ(residual.top_p, 0.6);
  EXPECT_EQ(s.code2wav.device, "cuda");
  EXPECT_EQ(s.code2wav.chunk_size, 50);
  EXPECT_EQ(s.code2wav.left_context, 0);
  EXPECT_TRUE(speech_stages_from_yaml("stages: [thinker, talker]", "t.yaml").runs("talker"));
}

TEST(SpeechStages, UnknownStagesAndChainsOtherThanAPrefixAreRefused) {
  veomni::testing::expect_input_error([] { speech_stages_from_yaml("stages: [thinker, vocoder]", "s.yaml"); },
                              {"s.yaml", "key 'stages'", "unknown stage 'vocoder'", "thinker, talker, code2wav"});
  for (const char* bad : {"stages: []", "stages: [talker, code2wav]", "stages: [thinker, code2wav]",
                          "stages: [thinker, thinker]", "stages: [thinker, code2wav, talker]"})
    veomni::testing::expect_input_error([&] { speech_stages_from_yaml(bad, "s.yaml"); }, {"s.yaml", "key 'stages'"});
}

TEST(SpeechStages, UnknownKeysNameTheFileTheKeyAndTheLine) {
  veomni::testing::expect_input_error([] { speech_stages_from_yaml("talker:\n  temprature: 0.5\n", "s.yaml"); },
                              {"s.yaml", "talker.temprature", "line 2", "talker.temperature"});
  veomni::testing::expect_input_error([] { speech_stages_from_yaml("vocoder: {device: cpu}\n", "s.yaml"); },
                              {"s.yaml", "vocoder"});
}

TEST(SpeechStages, BadValuesNameTheFileAndTheKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"talker:\n  temperature: -1", "talker.temperature"},
      {"talker:\n  top_p: 0", "talker.top_p"},
      {"talker:\n  top_k: -2", "talker.top_k"},
      {"talker:\n  repetition_penalty: 0", "talker.repetition_penalty"},
      {"talker:\n  max_new_tokens: 0", "talker.max_new_tokens"},
      {"talker:\n  max_new_tokens: many", "talker.max_new_tokens"},
      {"talker:\n  seed: -1", "talker.seed"},
      {"talker:\n  code_predictor: {top_p: 1.5}", "talker.code_predictor.top_p"},
      {"thinker:\n  temperature: .nan", "thinker.temperature"},
      {"thinker:\n  max_new_tokens: 0", "thinker.max_new_tokens"},
      {"code2wav:\n  device: tpu", "code2wav.device"},
      {"code2wav:\n  chunk_size: 0", "code2wav.chunk_size"},
      {"code2wav:\n  left_context: -1", "code2wav.left_context"},
      {"speaker: ''", "speaker"},
      {"stages: thinker: talker", "s.yaml"},
  };
  for (const auto& [yaml, key] : cases)
    veomni::testing::expect_input_error([&] { speech_stages_from_yaml(yaml, "s.yaml"); }, {"s.yaml", key});
}

TEST(SpeechStages, TheReferenceListsEveryKeyAndLoadsBack) {
  const std::string reference = speech_stages_reference_yaml();
  for (const char* key : {"stages", "speaker", "code_predictor", "left_context", "repetition_penalty"})
    EXPECT_NE(reference.find(key), std::string::npos) << key;
  const SpeechStages again = speech_stages_from_yaml(reference, "reference.yaml");
  EXPECT_EQ(again.stages, SpeechStages{}.stages);
  EXPECT_DOUBLE_EQ(again.talker.temperature, 0.9);
}

}  // namespace
}  // namespace veomni
