// Code2wav: config parsing, output length (the product of the upsampling rates), causality, clamping, bad codes,
// loading errors, and the transformers fixture (tests/fixtures/omni_speech, scripts/gen_omni_speech_fixtures.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/code2wav/code2wav.h"
#include "model/weight_source.h"
#include "tests/common/expect_error.h"
#include "tests/common/scratch_dir.h"
#include "tests/unit/speech_test_util.h"

namespace veomni {
namespace {

Code2WavConfig tiny_code2wav() { return speech_test::tiny_code2wav_config(); }

std::vector<int64_t> random_codes(int64_t frames, const Code2WavConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> dist(0, c.codebook_size - 1);
  std::vector<int64_t> codes(static_cast<size_t>(frames * c.num_quantizers));
  for (int64_t& code : codes) code = dist(rng);
  return codes;
}

TEST(Code2WavConfig, ReadsTheToyOmniConfig) {
  const Code2WavConfig c =
      load_code2wav_config(std::string(VEOMNI_FIXTURES_DIR) + "/veomni_toy_configs/qwen3omni_toy/config.json");
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.sliding_window, 72);
  EXPECT_EQ(c.decoder_dim, 1536);
  EXPECT_EQ(c.upsample_rates, (std::vector<int64_t>{8, 5, 4, 3}));
  EXPECT_EQ(c.upsampling_ratios, (std::vector<int64_t>{2, 2}));
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.head_dim(), 64);
  EXPECT_EQ(c.total_upsample(), 8 * 5 * 4 * 3 * 2 * 2);  // 1920 samples per frame: 24 kHz at 12.5 Hz
  // Each decoder block's causal transposed conv drops `rate` samples: ((((4T-1)*8-1)*5-1)*4-1)*3.
  EXPECT_EQ(c.waveform_samples(10), ((((40 - 1) * 8 - 1) * 5 - 1) * 4 - 1) * 3);
}

TEST(Code2WavConfig, RejectsBadValues) {
  nlohmann::json j = {{"decoder_dim", 100}, {"upsample_rates", {8, 5, 4}}};
  testing::expect_input_error([&] { code2wav_config_from_json(j, "cfg"); }, {"cfg", "decoder_dim"});
  j = {{"hidden_act", "gelu"}};
  testing::expect_input_error([&] { code2wav_config_from_json(j, "cfg"); }, {"hidden_act"});
  j = {{"attention_bias", true}};
  testing::expect_input_error([&] { code2wav_config_from_json(j, "cfg"); }, {"attention_bias"});
}

TEST(Code2Wav, WaveformLengthIsTheUpsamplingProductLessTheCausalTrim) {
  const Code2WavConfig c = tiny_code2wav();
  Code2Wav model(c);
  speech_test::randomize(model.store(), 1);
  for (int64_t frames : {1, 4, 7}) {
    const std::vector<float> wav = model.decode(random_codes(frames, c, 2));
    EXPECT_EQ(static_cast<int64_t>(wav.size()), c.waveform_samples(frames));
    // 2 (upsampling) then ((2T - 1) * 3 - 1) * 2: within the last block's strides of T * total_upsample.
    EXPECT_EQ(static_cast<int64_t>(wav.size()), ((2 * frames - 1) * 3 - 1) * 2);
    for (float s : wav) ASSERT_TRUE(s >= -1.0f && s <= 1.0f) << s;
  }
}

TEST(Code2Wav, IsCausalAPrefixOfCodesGivesAPrefixOfTheWaveform) {
  const Code2WavConfig c = tiny_code2wav();
  Code2Wav model(c);
  speech_test::randomize(model.store(), 3);
  const std::vector<int64_t> codes = random_codes(9, c, 4);
  const std::vector<float> whole = model.decode(codes);
  const std::vector<int64_t> head(codes.begin(), codes.begin() + 5 * c.num_quantizers);
  const std::vector<float> part = model.decode(head);
  ASSERT_EQ(static_cast<int64_t>(part.size()), c.waveform_samples(5));
  double worst = 0, scale = 0;
  for (size_t i = 0; i < part.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(part[i] - whole[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(whole[i])));
  }
  EXPECT_LE(worst, 1e-6) << "the first frames' waveform depends on later frames";
  EXPECT_GT(scale, 1e-3) << "a silent waveform proves nothing";
  // Changing a later frame changes the waveform after the prefix only.
  std::vector<int64_t> changed = codes;
  changed[8 * c.num_quantizers] = (changed[8 * c.num_quantizers] + 1) % c.codebook_size;
  const std::vector<float> other = model.decode(changed);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), other.begin()));
  EXPECT_FALSE(std::equal(whole.begin(), whole.end(), other.begin()));
}

TEST(Code2Wav, ChunkedDecodeDropsEachChunksLeftContext) {
  const Code2WavConfig c = tiny_code2wav();
  Code2Wav model(c);
  speech_test::randomize(model.store(), 8);
  const std::vector<int64_t> codes = random_codes(9, c, 9);
  const int64_t nq = c.num_quantizers, up = c.total_upsample();
  // One chunk covering everything is the plain decode.
  EXPECT_EQ(model.chunked_decode(codes, 9, 2), model.decode(codes));
  // Chunks [0,4) (no context), [4,8) after frames 2..3, [8,9) after 6..7 (transformers' chunked_decode).
  const auto frames = [&](int64_t a, int64_t b) {
    return std::vector<int64_t>(codes.begin() + a * nq, codes.begin() + b * nq);
  };
  std::vector<float> want = model.decode(frames(0, 4));
  const std::vector<float> second = model.decode(frames(2, 8)), third = model.decode(frames(6, 9));
  want.insert(want.end(), second.begin() + 2 * up, second.end());
  want.insert(want.end(), third.begin() + 2 * up, third.end());
  EXPECT_EQ(model.chunked_decode(codes, 4, 2), want);
  // With at most left_context frames before a chunk, all of them are its context: [0,2), then [2,4) after 0..1,
  // then [4,6) after 2..3.
  std::vector<float> small = model.decode(frames(0, 2));
  const std::vector<float> b = model.decode(frames(0, 4)), d = model.decode(frames(2, 6));
  small.insert(small.end(), b.begin() + 2 * up, b.end());
  small.insert(small.end(), d.begin() + 2 * up, d.end());
  EXPECT_EQ(model.chunked_decode(frames(0, 6), 2, 2), small);
}

TEST(Code2Wav, RejectsCodesOutsideTheCodebookAndPartialFrames) {
  const Code2WavConfig c = tiny_code2wav();
  Code2Wav model(c);
  testing::expect_input_error([&] { model.forward({1, 2, 10}); }, {"code 10", "frame 0", "quantizer 2"});
  testing::expect_input_error([&] { model.forward({1, 2, 3, 4}); }, {"4 codes", "num_quantizers = 3"});
  testing::expect_input_error([&] { model.forward({}); }, {"0 codes"});
}

class Code2WavLoad : public testing::ScratchDir {};

TEST_F(Code2WavLoad, AMissingTensorNamesTheTensorAndTheFile) {
  const Code2WavConfig c = tiny_code2wav();
  Code2Wav model(c);
  speech_test::randomize(model.store(), 5);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& p : model.store().all())
    if (p->name != "code2wav.decoder.2.block.3.conv1.conv.weight") tensors.emplace_back(p->name, p->value.clone());
  const std::string file = path("model.safetensors");
  write_safetensors(file, tensors);
  Code2Wav loaded(c);
  testing::expect_input_error([&] { loaded.load(HfCheckpointSource(file)); },
                              {"code2wav.decoder.2.block.3.conv1.conv.weight", "model.safetensors"});
  // With every tensor present the loaded model decodes as the original.
  tensors.emplace_back("code2wav.decoder.2.block.3.conv1.conv.weight",
                       model.store().at("code2wav.decoder.2.block.3.conv1.conv.weight").value.clone());
  write_safetensors(file, tensors);
  loaded.load(HfCheckpointSource(file));
  const std::vector<int64_t> codes = random_codes(3, c, 6);
  EXPECT_EQ(loaded.decode(codes), model.decode(codes));
}

// ---------------------------------------------------------------- transformers fixture

// tests/fixtures/omni_speech/, written by scripts/gen_omni_speech_fixtures.py with transformers 5.17 (CPU fp32).
std::string speech_fixture_dir() { return std::string(VEOMNI_FIXTURES_DIR) + "/omni_speech"; }

TEST(Code2WavHfFixture, WaveformMatchesTransformers) {
  const std::string dir = speech_fixture_dir();
  if (!std::filesystem::exists(dir))
    GTEST_SKIP() << "no fixture tests/fixtures/omni_speech: generate it with scripts/gen_omni_speech_fixtures.py "
                    "(torch + transformers 5.17)";
  for (const char* file : {"config.json", "model.safetensors", "inputs.safetensors", "expected.safetensors"})
    ASSERT_TRUE(std::filesystem::exists(dir + "/" + file)) << "incomplete fixture: no " << dir << "/" << file;
  Code2Wav model(load_code2wav_config(dir));
  model.load(HfCheckpointSource(dir));
  SafetensorsReader inputs(dir + "/inputs.safetensors");
  SafetensorsReader expected(dir + "/expected.safetensors");
  const Tensor codes_tensor = inputs.read("code2wav.codes");  // [T, num_quantizers] i64
  std::vector<int64_t> codes(static_cast<size_t>(codes_tensor.numel()));
  for (int64_t i = 0; i < codes_tensor.numel(); ++i)
    codes[static_cast<size_t>(i)] = static_cast<int64_t>(codes_tensor.item_as_double(i));
  const std::vector<float> wav = model.decode(codes);
  const std::vector<float> want = expected.read("code2wav.waveform").to_dtype(DType::F32).to_float_vector();
  ASSERT_EQ(wav.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < wav.size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(wav[i] - want[i])));
  EXPECT_LE(worst, 1e-3) << "max abs waveform difference";
  const std::vector<float> chunked = model.chunked_decode(codes, 5, 3);
  const std::vector<float> want_chunked = expected.read("code2wav.chunked_waveform").to_float_vector();
  ASSERT_EQ(chunked.size(), want_chunked.size());
  double worst_chunked = 0;
  for (size_t i = 0; i < chunked.size(); ++i)
    worst_chunked = std::max(worst_chunked, static_cast<double>(std::fabs(chunked[i] - want_chunked[i])));
  EXPECT_LE(worst_chunked, 1e-3) << "max abs difference of chunked_decode";
  std::printf("[code2wav] %zu samples, max abs diff %.3g (chunked %.3g)\n", wav.size(), worst, worst_chunked);
}

}  // namespace
}  // namespace veomni
