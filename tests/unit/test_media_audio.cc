// Audio preprocessing: decoding (WAV/FLAC/OGG/MP3, mono mixing, soxr resampling), Slaney mel filters, Whisper log-mel
// against hand-computed values and against transformers' WhisperFeatureExtractor (scripts/media_fixtures/audio.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <numbers>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/audio_length.h"
#include "io/safetensors.h"
#include "media/audio_decode.h"
#include "media/whisper_mel.h"
#include "tests/common/scratch_dir.h"
#include "tests/unit/test_media_image_fixture.h"

using namespace veomni;

namespace {

using veomni::test::kMediaInputs;
using veomni::test::media_file_bytes;

const std::string kAudioFixtures = std::string(VEOMNI_FIXTURES_DIR) + "/media/audio/";
const std::string kWav16k = kMediaInputs + "audio_speech_16k_mono.wav";

uint32_t le32(const std::vector<uint8_t>& b, size_t at) {
  return b[at] | (b[at + 1] << 8) | (b[at + 2] << 16) | (static_cast<uint32_t>(b[at + 3]) << 24);
}

// 16-bit PCM samples of a WAV's "data" chunk as float (s / 32768), parsed here without libsndfile.
std::vector<float> pcm16_wav_samples(const std::string& path) {
  const std::vector<uint8_t> b = media_file_bytes(path);
  for (size_t at = 12; at + 8 <= b.size(); at += 8 + le32(b, at + 4)) {
    if (std::string(b.begin() + at, b.begin() + at + 4) != "data") continue;
    std::vector<float> samples(le32(b, at + 4) / 2);
    for (size_t i = 0; i < samples.size(); ++i) {
      samples[i] = static_cast<int16_t>(b[at + 8 + 2 * i] | (b[at + 9 + 2 * i] << 8)) / 32768.0f;
    }
    return samples;
  }
  ADD_FAILURE() << path << ": no data chunk";
  return {};
}

void put16(std::string& s, uint16_t v) { s.append({static_cast<char>(v & 0xff), static_cast<char>(v >> 8)}); }
void put32(std::string& s, uint32_t v) {
  put16(s, static_cast<uint16_t>(v & 0xffff));
  put16(s, static_cast<uint16_t>(v >> 16));
}

// A canonical 44-byte-header WAV with interleaved 16-bit frames; format_tag 1 is PCM.
void write_wav(const std::string& path, int rate, int channels, const std::vector<int16_t>& interleaved,
               uint16_t format_tag = 1) {
  std::string s = "RIFF";
  put32(s, static_cast<uint32_t>(36 + 2 * interleaved.size()));
  s += "WAVEfmt ";
  put32(s, 16);
  put16(s, format_tag);
  put16(s, static_cast<uint16_t>(channels));
  put32(s, static_cast<uint32_t>(rate));
  put32(s, static_cast<uint32_t>(rate * channels * 2));
  put16(s, static_cast<uint16_t>(channels * 2));
  put16(s, 16);
  s += "data";
  put32(s, static_cast<uint32_t>(2 * interleaved.size()));
  for (int16_t v : interleaved) put16(s, static_cast<uint16_t>(v));
  std::ofstream(path, std::ios::binary) << s;
}

// Runs f, expecting an InputError whose message names `path`.
template <typename F>
void expect_input_error_naming(const std::string& path, F&& f) {
  try {
    f();
    ADD_FAILURE() << "no error for " << path;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

double rms(const std::vector<float>& x) {
  double s = 0;
  for (float v : x) s += static_cast<double>(v) * v;
  return std::sqrt(s / static_cast<double>(x.size()));
}

// Largest normalised cross-correlation of a and b over lags in [-max_lag, max_lag].
double best_correlation(const std::vector<float>& a, const std::vector<float>& b, int max_lag) {
  double best = -1;
  for (int lag = -max_lag; lag <= max_lag; ++lag) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = max_lag; i + max_lag < static_cast<int64_t>(std::min(a.size(), b.size())); ++i) {
      ab += static_cast<double>(a[i]) * b[i + lag];
      aa += static_cast<double>(a[i]) * a[i];
      bb += static_cast<double>(b[i + lag]) * b[i + lag];
    }
    best = std::max(best, ab / std::sqrt(aa * bb));
  }
  return best;
}

using MediaAudioDecode = veomni::testing::ScratchDir;

TEST_F(MediaAudioDecode, Wav16kMonoIsTheExactPcmSamples) {
  const std::vector<float> expected = pcm16_wav_samples(kWav16k);
  ASSERT_EQ(expected.size(), 51278u);
  EXPECT_EQ(decode_audio(kWav16k), expected);
}

TEST_F(MediaAudioDecode, FlacDecodesToTheWavSamples) {
  EXPECT_EQ(decode_audio(kMediaInputs + "audio_speech_16k_mono.flac"), pcm16_wav_samples(kWav16k));
}

TEST_F(MediaAudioDecode, Wav44kStereoIsMixedAndResampled) {
  // One second at 44.1 kHz: ceil(44100 · 16000/44100) samples; channels are c0 and 0.5·c0, so mono is 0.75·c0,
  // which at 16 kHz is 0.75 times the first second of the 16 kHz file (both made from the same speech).
  const std::vector<float> mono = decode_audio(kMediaInputs + "audio_speech_44k_stereo.wav");
  ASSERT_EQ(mono.size(), 16000u);
  std::vector<float> reference = pcm16_wav_samples(kWav16k);
  reference.resize(16000);
  for (float& v : reference) v *= 0.75f;
  EXPECT_NEAR(rms(mono) / rms(reference), 1.0, 0.02);
  EXPECT_GT(best_correlation(mono, reference, 4), 0.99);
}

TEST_F(MediaAudioDecode, SyntheticStereoSineMixesAndResamplesAccurately) {
  // Left: 440 Hz at amplitude 0.5, right: silence -> mono 0.25·sin; 0.5 s at 44.1 kHz -> ceil(22050·16/44.1).
  const int rate = 44100, frames = 22050;
  std::vector<int16_t> pcm(2 * frames, 0);
  for (int i = 0; i < frames; ++i)
    pcm[2 * i] = static_cast<int16_t>(std::lround(16384 * std::sin(2 * std::numbers::pi * 440.0 * i / rate)));
  write_wav(path("sine.wav"), rate, 2, pcm);
  const std::vector<float> mono = decode_audio(path("sine.wav"));
  ASSERT_EQ(mono.size(), 8000u);
  double worst = 0;
  for (int i = 400; i < 7600; ++i) {  // away from the filter's start-up and flush edges
    worst = std::max(worst, std::abs(mono[i] - 0.25 * std::sin(2 * std::numbers::pi * 440.0 * i / 16000)));
  }
  EXPECT_LT(worst, 2e-4);
}

TEST_F(MediaAudioDecode, TargetRateIsHonoured) {
  EXPECT_EQ(decode_audio(kWav16k, 8000).size(), 25639u);   // ceil(51278 / 2)
  EXPECT_EQ(decode_audio(kWav16k, 24000).size(), 76917u);  // 51278 · 1.5
}

TEST_F(MediaAudioDecode, LossyOggAndMp3AreTheSameSpeech) {
  // Both encode the 22.05 kHz source; decoded at 16 kHz they should line up with the WAV made from it.
  const std::vector<float> wav = decode_audio(kWav16k);
  for (const char* name : {"audio_speech_22k.ogg", "audio_speech_22k.mp3"}) {
    const std::vector<float> lossy = decode_audio(kMediaInputs + name);
    EXPECT_NEAR(static_cast<double>(lossy.size()), static_cast<double>(wav.size()), 0.03 * wav.size()) << name;
    EXPECT_NEAR(rms(lossy) / rms(wav), 1.0, 0.1) << name;
  }
  const std::vector<float> ogg = decode_audio(kMediaInputs + "audio_speech_22k.ogg");
  EXPECT_EQ(ogg.size(), 51278u);  // ceil(70667 · 16000/22050): Vorbis keeps the exact length
  EXPECT_GT(best_correlation(ogg, wav, 4), 0.9);
}

TEST_F(MediaAudioDecode, MissingFileIsInputErrorNamingIt) {
  expect_input_error_naming(path("absent.wav"), [&] { decode_audio(path("absent.wav")); });
}

TEST_F(MediaAudioDecode, CorruptFileIsInputErrorNamingIt) {
  std::ofstream(path("corrupt.wav"), std::ios::binary) << "RIFF\x10\0\0\0WAVEthis is not audio at all";
  expect_input_error_naming(path("corrupt.wav"), [&] { decode_audio(path("corrupt.wav")); });
  std::ofstream(path("text.mp3"), std::ios::binary) << "plain text, no audio frames here\n";
  expect_input_error_naming(path("text.mp3"), [&] { decode_audio(path("text.mp3")); });
}

TEST_F(MediaAudioDecode, UnsupportedCodecIsInputErrorNamingIt) {
  write_wav(path("codec.wav"), 16000, 1, std::vector<int16_t>(1600, 0), 0x1234);
  expect_input_error_naming(path("codec.wav"), [&] { decode_audio(path("codec.wav")); });
}

TEST_F(MediaAudioDecode, ZeroLengthAudioIsInputErrorNamingIt) {
  write_wav(path("empty.wav"), 16000, 1, {});
  expect_input_error_naming(path("empty.wav"), [&] { decode_audio(path("empty.wav")); });
  std::ofstream(path("zero_bytes.flac"), std::ios::binary).flush();
  expect_input_error_naming(path("zero_bytes.flac"), [&] { decode_audio(path("zero_bytes.flac")); });
}

// --- Slaney mel filters -------------------------------------------------------------------------------------------

// Slaney mel -> Hz written as librosa's mel_to_hz (f_sp = 200/3, log step ln(6.4)/27 above 1 kHz = 15 mel).
double mel_to_hz_librosa(double mel) {
  const double f_sp = 200.0 / 3, min_log_mel = 1000.0 / f_sp, logstep = std::log(6.4) / 27.0;
  return mel >= min_log_mel ? 1000.0 * std::exp(logstep * (mel - min_log_mel)) : f_sp * mel;
}

TEST(MediaWhisperMel, SlaneyFiltersMatchTheFormula) {
  const WhisperMelConfig config;
  const std::vector<double> filters = slaney_mel_filters(config);
  ASSERT_EQ(filters.size(), 128u * 201u);
  const double max_mel = 45.245640471924965;  // hz_to_mel(8000) in Slaney units, the constant older Whisper used
  for (int m : {0, 1, 2, 30, 64, 100, 127}) {
    const double lo = mel_to_hz_librosa(max_mel * m / 129), mid = mel_to_hz_librosa(max_mel * (m + 1) / 129),
                 hi = mel_to_hz_librosa(max_mel * (m + 2) / 129);
    for (int b = 0; b < 201; ++b) {
      const double f = 40.0 * b;
      const double tri = std::max(0.0, std::min((f - lo) / (mid - lo), (hi - f) / (hi - mid)));
      EXPECT_NEAR(filters[m * 201 + b], tri * 2.0 / (hi - lo), 1e-12) << "mel " << m << " bin " << b;
    }
  }
  // Filter 0 spans 0 .. 2·(8000-Hz mel)/129 ≈ 46.8 Hz: only bin 1 (40 Hz) is inside, on the falling edge.
  EXPECT_EQ(filters[0], 0.0);
  EXPECT_GT(filters[1], 0.0);
  EXPECT_EQ(filters[2], 0.0);
}

TEST(MediaWhisperMel, SlaneyFiltersHaveUnitAreaWhereWideEnough) {
  // Slaney normalisation makes each triangle's area 1; sampled every 40 Hz, the wide filters (from ~4 kHz up)
  // come within a few percent, and the sampling error averages out over many of them.
  const std::vector<double> filters = slaney_mel_filters({});
  double total = 0;
  for (int m = 100; m < 127; ++m) {
    double area = 0;
    for (int b = 0; b < 201; ++b) area += filters[m * 201 + b] * 40.0;
    EXPECT_NEAR(area, 1.0, 0.03) << "mel " << m;
    total += area;
  }
  EXPECT_NEAR(total / 27, 1.0, 0.005);
}

// --- Whisper log-mel -------------------------------------------------------------------------------------------

std::vector<float> sine(int n, double hertz, double amplitude, int rate = 16000) {
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(amplitude * std::sin(2 * std::numbers::pi * hertz * i / rate));
  return x;
}

TEST(MediaWhisperMel, FramesAreFloorOfSamplesOverHop) {
  for (int n : {201, 320, 479, 16000, 16159, 16160, 51278}) {
    const Tensor mel = whisper_log_mel(sine(n, 440, 0.1));
    EXPECT_EQ(mel.shape(), (Shape{n / 160, 128})) << n;
    EXPECT_EQ(mel.dtype(), DType::F32);
  }
}

TEST(MediaWhisperMel, BinCentredSinePeaksWhereTheFiltersSay) {
  // 1 kHz = bin 25 exactly (25 cycles per 400 samples): the periodic-Hann spectrum of a frame is exactly
  // |X[25]| = A/2 · 200, |X[24]| = |X[26]| = A/2 · 100 and zero elsewhere, whatever the phase.
  const double amplitude = 0.5;
  const Tensor mel = whisper_log_mel(sine(16000, 1000.0, amplitude));
  const std::vector<double> filters = slaney_mel_filters({});
  std::vector<double> expected(128);
  for (int m = 0; m < 128; ++m) {
    const double p25 = std::pow(amplitude / 2 * 200, 2), p24 = std::pow(amplitude / 2 * 100, 2);
    expected[m] = filters[m * 201 + 24] * p24 + filters[m * 201 + 25] * p25 + filters[m * 201 + 26] * p24;
  }
  const int peak = static_cast<int>(std::max_element(expected.begin(), expected.end()) - expected.begin());
  EXPECT_NEAR(mel_to_hz_librosa(45.245640471924965 * (peak + 1) / 129), 1000.0, 40.0);  // centre near 1 kHz
  const double peak_value = (std::log10(expected[peak]) + 4.0) / 4.0;
  const float* row = mel.data<float>() + 50 * 128;  // a frame away from the reflect-padded edges
  EXPECT_EQ(std::max_element(row, row + 128) - row, peak);
  EXPECT_NEAR(row[peak], peak_value, 1e-5);
  for (int m = 0; m < 128; ++m) {
    const double value = std::max(std::log10(std::max(expected[m], 1e-10)), std::log10(expected[peak]) - 8.0);
    EXPECT_NEAR(row[m], (value + 4.0) / 4.0, 1e-5) << "mel " << m;
  }
  // Everything far from 1 kHz sits at the clamp: max - 8 in log10, i.e. exactly 2 below the peak after /4.
  const std::vector<float> all = mel.to_float_vector();
  EXPECT_NEAR(*std::max_element(all.begin(), all.end()) - *std::min_element(all.begin(), all.end()), 2.0, 1e-6);
}

// The same features by a plain O(n²) DFT over explicitly reflect-padded frames, in double.
std::vector<double> naive_log_mel(const std::vector<float>& x, const WhisperMelConfig& c) {
  const int64_t n = static_cast<int64_t>(x.size());
  const int bins = c.n_fft / 2 + 1;
  const std::vector<double> filters = slaney_mel_filters(c);
  std::vector<double> padded;
  for (int64_t i = -c.n_fft / 2; i < n + c.n_fft / 2; ++i)
    padded.push_back(x[i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i]);
  std::vector<double> out;
  for (int64_t t = 0; t < n / c.hop_length; ++t) {
    std::vector<double> power(bins);
    for (int k = 0; k < bins; ++k) {
      std::complex<double> sum = 0;
      for (int j = 0; j < c.n_fft; ++j) {
        const double w = 0.5 - 0.5 * std::cos(2 * std::numbers::pi * j / c.n_fft);
        sum += w * padded[t * c.hop_length + j] * std::polar(1.0, -2 * std::numbers::pi * (double(j) * k) / c.n_fft);
      }
      power[k] = std::norm(sum);
    }
    for (int m = 0; m < c.n_mels; ++m) {
      double mel = 0;
      for (int k = 0; k < bins; ++k) mel += filters[m * bins + k] * power[k];
      out.push_back(std::log10(std::max(mel, 1e-10)));
    }
  }
  const double floor = *std::max_element(out.begin(), out.end()) - 8.0;
  for (double& v : out) v = (std::max(v, floor) + 4.0) / 4.0;
  return out;
}

TEST(MediaWhisperMel, MatchesAPlainDftForSeveralFftSizes) {
  std::vector<float> noise(2500);
  uint32_t state = 12345;
  for (float& v : noise) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / static_cast<float>(1 << 24) - 0.5f;
  }
  // 400 = 2^4·5^2 (Whisper), 512 = 2^9, 231 = 3·7·11 (odd radices).
  for (const WhisperMelConfig c :
       {WhisperMelConfig{}, WhisperMelConfig{16000, 512, 128, 80}, WhisperMelConfig{16000, 231, 100, 40}}) {
    const Tensor mel = whisper_log_mel(noise, c);
    const std::vector<double> expected = naive_log_mel(noise, c);
    ASSERT_EQ(mel.numel(), static_cast<int64_t>(expected.size())) << c.n_fft;
    const std::vector<float> got = mel.to_float_vector();
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - expected[i]));
    EXPECT_LT(worst, 1e-6) << "n_fft " << c.n_fft;
  }
}

TEST(MediaWhisperMel, ClipsTooShortOrBadConfigAreInputErrors) {
  EXPECT_THROW(whisper_log_mel(std::vector<float>(200, 0.1f)), InputError);  // reflect pad needs > n_fft/2
  EXPECT_EQ(whisper_log_mel(std::vector<float>(201, 0.1f)).shape(), (Shape{1, 128}));
  EXPECT_THROW(whisper_log_mel(std::vector<float>(1000, 0.1f), {16000, 400, 0, 128}), InputError);
  EXPECT_THROW(slaney_mel_filters({16000, 400, 160, 0}), InputError);
}

TEST(MediaWhisperMel, SilenceIsAllAtTheFloor) {
  const Tensor mel = whisper_log_mel(std::vector<float>(1600, 0.0f));
  for (float v : mel.to_float_vector()) EXPECT_FLOAT_EQ(v, (-10.0f + 4.0f) / 4.0f);
}

// --- transformers fixture ---------------------------------------------------------------------------------------

// Written by scripts/media_fixtures/audio.py (transformers' WhisperFeatureExtractor with the Qwen3-Omni processor's
// audio kwargs, one clip per call) on tests/fixtures/media/inputs/audio_speech_16k_mono.wav.
TEST(MediaAudioHfFixture, FeaturesLengthsAndTokensMatchTransformers) {
  const std::string json_path = kAudioFixtures + "whisper_features.json";
  const std::string tensors_path = kAudioFixtures + "whisper_features.safetensors";
  std::ifstream json_file(json_path);
  ASSERT_TRUE(json_file.good()) << "missing fixture " << json_path << " (run scripts/media_fixtures/audio.py)";
  const nlohmann::json meta = nlohmann::json::parse(json_file);
  SafetensorsReader expected(tensors_path);

  // HF's float64 filters, stored as f32: equal to ours up to that rounding.
  const std::vector<double> ours_filters = slaney_mel_filters({});
  const std::vector<float> hf_filters = expected.read("mel_filters").to_float_vector();
  ASSERT_EQ(hf_filters.size(), ours_filters.size());
  for (size_t i = 0; i < hf_filters.size(); ++i) {
    ASSERT_NEAR(ours_filters[i], hf_filters[i], 1e-7 * std::abs(hf_filters[i])) << "filter entry " << i;
  }

  const std::vector<float> clip = decode_audio(kMediaInputs + meta["source"].get<std::string>());
  for (const auto& c : meta["cases"]) {
    const std::string name = c["name"];
    const std::vector<float> samples(clip.begin(), clip.begin() + c["num_samples"].get<int64_t>());
    const Tensor ours = whisper_log_mel(samples);
    const Tensor hf = expected.read(name + ".input_features");
    ASSERT_EQ(ours.shape(), hf.shape()) << name;
    EXPECT_EQ(ours.dim(0), c["feature_length"].get<int64_t>()) << name;
    EXPECT_EQ(audio_output_length(ours.dim(0)), c["audio_tokens"].get<int64_t>()) << name;
    const std::vector<float> a = ours.to_float_vector(), b = hf.to_float_vector();
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
    EXPECT_LE(worst, 1e-3) << name;
    ::testing::Test::RecordProperty(name + "_max_abs_err", std::to_string(worst));
    std::printf("%s: %lld frames, max abs err vs transformers %.3g\n", name.c_str(),
                static_cast<long long>(ours.dim(0)), worst);
  }
}

}  // namespace
