// Qwen3-Omni speaking end to end against transformers (tests/fixtures/omni_pipeline from
// scripts/gen_omni_pipeline_fixtures.py): our thinker generates each prompt's reply greedily, the talker speaks it
// (greedy first codebook with transformers' repetition penalty, its code predictor sampled as transformers samples
// it) and code2wav decodes it; thinker ids and codec codes must be identical, the waveform within 1e-3.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generate/generation_model.h"
#include "generate/generator.h"
#include "generate/omni_speaker.h"
#include "generate/speech_stages.h"
#include "io/json_file.h"
#include "io/safetensors.h"

namespace veomni {
namespace {

std::string pipeline_fixture_dir() { return std::string(VEOMNI_FIXTURES_DIR) + "/omni_pipeline"; }

std::vector<int64_t> int_vector(const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = static_cast<int64_t>(t.item_as_double(i));
  return out;
}

class OmniPipelineHfFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = pipeline_fixture_dir();
    if (!std::filesystem::exists(dir_ + "/expected.json"))
      GTEST_SKIP() << "no fixture tests/fixtures/omni_pipeline: generate it with "
                      "scripts/gen_omni_pipeline_fixtures.py (torch + transformers 5.17)";
    for (const char* file : {"model/config.json", "model/model.safetensors", "expected.safetensors"})
      ASSERT_TRUE(std::filesystem::exists(dir_ + "/" + file)) << "incomplete fixture: no " << dir_ << "/" << file;
    facts_ = read_json_file(dir_ + "/expected.json");
    expected_ = std::make_unique<SafetensorsReader>(dir_ + "/expected.safetensors");
    model_ = load_generation_model(dir_ + "/model", Device::cpu());
  }
  // The stages as the fixture's generate call ran them: greedy thinker and talker (repetition penalty 1.05),
  // the code predictor at transformers' top_k 50, top_p 0.8.
  SpeechStages stages(const std::string& speaker) const {
    SpeechStages s;
    s.stages = speech_stage_names();
    s.speaker = speaker;
    s.talker.temperature = 0.0;
    s.talker.max_new_tokens = facts_.at("talker_max_new_tokens").get<int64_t>();
    return s;
  }
  std::string dir_;
  nlohmann::json facts_;
  std::unique_ptr<SafetensorsReader> expected_;
  GenerationModel model_;
};

TEST_F(OmniPipelineHfFixture, ThinkerIdsCodecCodesAndWaveformMatchTransformers) {
  const nlohmann::json& prompts = facts_.at("prompts");
  ASSERT_EQ(prompts.size(), 2u);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string key = "prompt" + std::to_string(i);
    const std::vector<int64_t> prompt = int_vector(expected_->read(key + ".input_ids"));
    const OmniSpeaker speaker(dir_ + "/model", stages(prompts[i].at("speaker").get<std::string>()));
    GenerateOptions options;
    options.max_new_tokens = facts_.at("thinker_max_new_tokens").get<int64_t>();
    options.stop_token_ids = model_.eos_token_ids;
    options.stop_token_ids.push_back(speaker.ids().im_end);
    options.mrope_positions = model_.mrope;
    Generator generator(*model_.model, options);
    const Generation reply = generator.generate({prompt}, static_cast<int64_t>(i)).front();
    std::vector<int64_t> sequence = prompt;
    sequence.insert(sequence.end(), reply.token_ids.begin(), reply.token_ids.end());
    ASSERT_EQ(sequence, int_vector(expected_->read(key + ".sequences"))) << key << ": thinker ids";

    const OmniSpeaker::Speech speech = speaker.speak(*model_.model, prompt, reply.token_ids, static_cast<int64_t>(i), key);
    const Tensor want_codes = expected_->read(key + ".codes");  // [frames, groups]
    EXPECT_EQ(speech.frames, want_codes.dim(0)) << key;
    EXPECT_EQ(speech.codes, int_vector(want_codes)) << key << ": codec codes";
    const std::vector<float> want = expected_->read(key + ".waveform").to_float_vector();
    ASSERT_EQ(speech.waveform.size(), want.size()) << key << ": waveform samples";
    double worst = 0;
    for (size_t s = 0; s < want.size(); ++s)
      worst = std::max(worst, static_cast<double>(std::fabs(speech.waveform[s] - want[s])));
    EXPECT_LE(worst, 1e-3) << key << ": waveform max abs difference";
    {  // DIAG
      std::vector<size_t> idx(want.size());
      for (size_t s = 0; s < idx.size(); ++s) idx[s] = s;
      std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return std::fabs(speech.waveform[a] - want[a]) > std::fabs(speech.waveform[b] - want[b]); });
      double mean = 0; int clamped = 0;
      for (size_t s = 0; s < want.size(); ++s) { mean += std::fabs(speech.waveform[s] - want[s]); clamped += std::fabs(want[s]) >= 1.0f; }
      std::printf("mean diff %.3g clamped %d\n", mean / want.size(), clamped);
      for (int k = 0; k < 8; ++k) std::printf("  %zu: ours %.6f want %.6f\n", idx[k], speech.waveform[idx[k]], want[idx[k]]);
    }
    std::printf("[omni pipeline] %s: %zu new tokens, %lld frames, %zu samples, waveform max abs diff %.3g\n",
                key.c_str(), reply.token_ids.size(), static_cast<long long>(speech.frames), want.size(), worst);
  }
}

}  // namespace
}  // namespace veomni
