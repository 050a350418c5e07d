// WAV encoding for veomni-generate --audio-out: the header (mono 16-bit PCM at the rate asked), samples that decode
// back within one PCM step, clipping beyond [-1, 1], and atomic writes that leave nothing on failure.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "media/audio_decode.h"
#include "media/audio_encode.h"
#include "tests/common/expect_error.h"
#include "tests/common/scratch_dir.h"

namespace veomni {
namespace {

uint32_t le32_at(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  std::memcpy(&v, bytes.data() + at, 4);
  return v;
}

uint16_t le16(const std::string& bytes, size_t at) {
  uint16_t v = 0;
  std::memcpy(&v, bytes.data() + at, 2);
  return v;
}

std::vector<float> tone(size_t n) {
  std::vector<float> samples(n);
  for (size_t i = 0; i < n; ++i) samples[i] = 0.8f * static_cast<float>(std::sin(0.01 * static_cast<double>(i)));
  return samples;
}

TEST(AudioEncode, WritesAMono16BitPcmWavHeader) {
  const std::string wav = encode_wav(tone(1000), 24000);
  ASSERT_GE(wav.size(), 44u + 2000u);
  EXPECT_EQ(wav.substr(0, 4), "RIFF");
  EXPECT_EQ(wav.substr(8, 4), "WAVE");
  EXPECT_EQ(le16(wav, 20), 1);       // PCM
  EXPECT_EQ(le16(wav, 22), 1);       // mono
  EXPECT_EQ(le32_at(wav, 24), 24000u);  // sample rate
  EXPECT_EQ(le16(wav, 34), 16);      // bits per sample
  EXPECT_EQ(le32_at(wav, 4), wav.size() - 8);
}

class AudioEncodeFile : public testing::ScratchDir {};

TEST_F(AudioEncodeFile, SamplesDecodeBackWithinOnePcmStepAndClip) {
  std::vector<float> samples = tone(4800);
  samples[10] = 1.7f;
  samples[11] = -3.0f;
  write_wav_file(path("a.wav"), samples, 24000);
  const std::vector<float> back = decode_audio(path("a.wav"), 24000);
  ASSERT_EQ(back.size(), samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    const float want = std::fmax(-1.0f, std::fmin(1.0f, samples[i]));
    ASSERT_NEAR(back[i], want, 1.0 / 32767 + 1e-6) << i;
  }
}

TEST_F(AudioEncodeFile, AMissingDirectoryIsAnInputErrorAndLeavesNothing) {
  testing::expect_input_error([&] { write_wav_file(path("no/such/dir/a.wav"), tone(10), 24000); },
                              {"no/such/dir"});
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

}  // namespace
}  // namespace veomni
