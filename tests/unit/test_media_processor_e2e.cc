// veomni-preprocess multimodal end to end against HF's whole processor (tests/fixtures/media/processor/).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "data/audio_length.h"
#include "data/constants.h"
#include "io/safetensors.h"
#include "media/multimodal_sample.h"
#include "test_tokenizer_util.h"

namespace veomni {
namespace {

using json = nlohmann::json;

const std::string kConversationsDir = std::string(VEOMNI_FIXTURES_DIR) + "/media/processor";
const std::string kConversations = kConversationsDir + "/conversations.jsonl";

// Where processor.json / processor.safetensors are read: the committed fixture, or $VEOMNI_PROCESSOR_FIXTURE_DIR
// (a fixture in the same format from elsewhere, e.g. to check these comparisons themselves).
std::string fixture_dir() {
  const char* dir = std::getenv("VEOMNI_PROCESSOR_FIXTURE_DIR");
  return dir != nullptr && *dir != '\0' ? std::string(dir) : kConversationsDir;
}

std::vector<json> read_conversations() {
  std::ifstream in(kConversations);
  EXPECT_TRUE(in.good()) << "cannot read " << kConversations;
  std::vector<json> records;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) records.push_back(json::parse(line));
  return records;
}

EncodedMultimodal encode(const Tokenizer& tokenizer, const json& record) {
  const MultimodalModel model = multimodal_model_from_name(record.at("model_type").get<std::string>());
  const MultimodalEncoder encoder(tokenizer, default_media_config(model));
  return encoder.encode(record, kConversationsDir);
}

std::vector<int64_t> sample_ints(const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (t.dtype()) {
      case DType::I64: out[static_cast<size_t>(i)] = t.data<int64_t>()[i]; break;
      case DType::Bool: out[static_cast<size_t>(i)] = t.data<bool>()[i] ? 1 : 0; break;
      default: ADD_FAILURE() << "unexpected dtype " << dtype_name(t.dtype()); return {};
    }
  }
  return out;
}

std::vector<float> sample_floats(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (t.dtype()) {
      case DType::F32: out[static_cast<size_t>(i)] = t.data<float>()[i]; break;
      case DType::F16: out[static_cast<size_t>(i)] = f16_to_float(t.data<f16>()[i]); break;
      default: ADD_FAILURE() << "unexpected dtype " << dtype_name(t.dtype()); return {};
    }
  }
  return out;
}

// Our ids as they were before VeOmni zeroed the media positions: each masked position gets its modality's pad token.
std::vector<int64_t> ids_before_zeroing(const Sample& sample, const MultimodalTokenIds& ids, bool omni) {
  std::vector<int64_t> out = sample_ints(sample.at("input_ids"));
  const std::vector<int64_t> image = sample_ints(sample.at("image_mask")), video = sample_ints(sample.at("video_mask"));
  const std::vector<int64_t> audio = omni ? sample_ints(sample.at("audio_mask")) : std::vector<int64_t>(out.size(), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    if (image[i] + video[i] + audio[i] == 0) continue;
    EXPECT_EQ(out[i], 0) << "media position " << i << " is not zeroed";
    out[i] = image[i] ? ids.image_pad : video[i] ? ids.video_pad : ids.audio_pad;
  }
  return out;
}

std::vector<int64_t> json_ints(const json& value) {
  std::vector<int64_t> out;
  for (const json& v : value) {
    if (v.is_array()) {
      const std::vector<int64_t> inner = json_ints(v);
      out.insert(out.end(), inner.begin(), inner.end());
    } else {
      out.push_back(v.get<int64_t>());
    }
  }
  return out;
}

std::vector<float> json_floats(const json& value) {
  std::vector<float> out;
  for (const json& row : value)
    for (const json& v : row) out.push_back(v.get<float>());
  return out;
}

// Max abs difference between our rows [rows, width] and the fixture's kept rows (every row_stride-th); 0 if none.
double vision_error(const Tensor& ours, const json& kept, const SafetensorsReader& expected, const std::string& key) {
  const int64_t rows = kept.at("rows").get<int64_t>(), stride = kept.at("row_stride").get<int64_t>();
  const int64_t width = kept.at("width").get<int64_t>();
  EXPECT_EQ(ours.dim(0), rows) << key;
  EXPECT_EQ(ours.dim(1), width) << key;
  const std::vector<float> want = sample_floats(expected.read(key));
  const std::vector<float> got = sample_floats(ours);
  const int64_t kept_rows = (rows + stride - 1) / stride;
  EXPECT_EQ(static_cast<int64_t>(want.size()), kept_rows * width) << key;
  if (ours.dim(0) != rows || ours.dim(1) != width || static_cast<int64_t>(want.size()) != kept_rows * width) return 1e9;
  double worst = 0;
  for (int64_t k = 0; k < kept_rows; ++k)
    for (int64_t c = 0; c < width; ++c)
      worst = std::max(worst, std::fabs(static_cast<double>(got[static_cast<size_t>(k * stride * width + c)]) -
                                        want[static_cast<size_t>(k * width + c)]));
  return worst;
}

double features_error(const Tensor& ours, const Tensor& want) {
  EXPECT_EQ(ours.shape(), want.shape()) << "input_features";
  if (ours.shape() != want.shape()) return 1e9;
  const std::vector<float> a = sample_floats(ours), b = sample_floats(want);
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

template <typename T>
T rope_delta(const std::vector<T>& positions, int64_t length) {
  const T top = *std::max_element(positions.begin(), positions.end());
  return static_cast<T>(top + T(1) - static_cast<T>(length));
}

// Our sample of one conversation against HF's: ids/masks/grids/lengths/positions identical, media within tolerance.
void expect_matches_hf(const json& want, const EncodedMultimodal& ours, const MultimodalTokenIds& token_ids,
                       const SafetensorsReader& expected) {
  const std::string name = want.at("name").get<std::string>();
  SCOPED_TRACE(name);
  const bool omni = want.at("model_type") == "qwen3_omni_moe";
  const Sample& s = ours.sample;
  const int64_t length = s.at("input_ids").numel();

  EXPECT_EQ(ids_before_zeroing(s, token_ids, omni), json_ints(want.at("input_ids")));
  EXPECT_EQ(sample_ints(s.at("attention_mask")), json_ints(want.at("attention_mask")));
  EXPECT_EQ(sample_ints(s.at("image_mask")), json_ints(want.at("image_mask")));
  EXPECT_EQ(sample_ints(s.at("video_mask")), json_ints(want.at("video_mask")));
  EXPECT_EQ(sample_ints(s.at("image_grid_thw")), json_ints(want.at("image_grid_thw")));
  EXPECT_EQ(sample_ints(s.at("video_grid_thw")), json_ints(want.at("video_grid_thw")));
  if (omni) {
    EXPECT_EQ(sample_ints(s.at("audio_mask")), json_ints(want.at("audio_mask")));
    EXPECT_EQ(sample_ints(s.at("audio_feature_lengths")), json_ints(want.at("audio_feature_lengths")));
    const std::vector<float> positions = sample_floats(s.at("position_ids"));
    EXPECT_EQ(positions, json_floats(want.at("position_ids")));
    EXPECT_FLOAT_EQ(rope_delta(positions, length), want.at("rope_delta").get<float>());
  } else {
    const std::vector<int64_t> positions = sample_ints(s.at("position_ids"));
    EXPECT_EQ(positions, json_ints(want.at("position_ids")));
    EXPECT_EQ(rope_delta(positions, length), want.at("rope_delta").get<int64_t>());
  }

  double pixels = 0, video_pixels = 0, features = 0;
  if (want.contains("pixel_values"))
    pixels = vision_error(s.at("pixel_values"), want.at("pixel_values"), expected, name + ".pixel_values");
  else
    EXPECT_EQ(s.at("pixel_values").numel(), 0);
  if (want.contains("pixel_values_videos"))
    video_pixels = vision_error(s.at("pixel_values_videos"), want.at("pixel_values_videos"), expected,
                                name + ".pixel_values_videos");
  else
    EXPECT_EQ(s.at("pixel_values_videos").numel(), 0);
  if (omni) {
    if (expected.contains(name + ".input_features"))
      features = features_error(s.at("input_features"), expected.read(name + ".input_features"));
    else
      EXPECT_EQ(s.at("input_features").numel(), 0);
  }
  EXPECT_LE(pixels, 2e-2);
  EXPECT_LE(video_pixels, 2e-2);
  EXPECT_LE(features, 1e-3);
  std::printf("[processor e2e] %-18s %5lld tokens: pixel_values max abs err %.3g, pixel_values_videos %.3g, "
              "input_features %.3g\n",
              name.c_str(), static_cast<long long>(length), pixels, video_pixels, features);
}

// Holds now, without the fixture: every conversation goes through our pipeline and its sample is self-consistent.
TEST(MediaProcessorE2E, ConversationsEncodeConsistently) {
  const Tokenizer* tokenizer = testing::qwen3_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const std::vector<json> records = read_conversations();
  ASSERT_EQ(records.size(), 7u);
  for (const json& record : records) {
    SCOPED_TRACE(record.at("name").get<std::string>());
    const EncodedMultimodal out = encode(*tokenizer, record);
    const Sample& s = out.sample;
    const bool omni = record.at("model_type") == "qwen3_omni_moe";
    const int64_t merge = 4;  // spatial merge 2 x 2
    int64_t image_tokens = 0, video_tokens = 0, audio_tokens = 0;
    const std::vector<int64_t> images = sample_ints(s.at("image_grid_thw")),
                               videos = sample_ints(s.at("video_grid_thw"));
    for (size_t i = 0; i < images.size(); i += 3) image_tokens += images[i] * images[i + 1] * images[i + 2] / merge;
    for (size_t i = 0; i < videos.size(); i += 3) video_tokens += videos[i] * videos[i + 1] * videos[i + 2] / merge;
    const std::vector<int64_t> image_mask = sample_ints(s.at("image_mask")),
                               video_mask = sample_ints(s.at("video_mask"));
    EXPECT_EQ(std::count(image_mask.begin(), image_mask.end(), 1), image_tokens);
    EXPECT_EQ(std::count(video_mask.begin(), video_mask.end(), 1), video_tokens);
    EXPECT_EQ(s.at("pixel_values").dim(0), image_tokens * merge);
    EXPECT_EQ(s.at("pixel_values_videos").dim(0), video_tokens * merge);
    EXPECT_EQ(out.images, static_cast<int64_t>(images.size() / 3));
    EXPECT_EQ(out.videos, static_cast<int64_t>(videos.size() / 3));
    if (omni) {
      for (int64_t frames : sample_ints(s.at("audio_feature_lengths"))) audio_tokens += audio_output_length(frames);
      const std::vector<int64_t> audio_mask = sample_ints(s.at("audio_mask"));
      EXPECT_EQ(std::count(audio_mask.begin(), audio_mask.end(), 1), audio_tokens);
      EXPECT_EQ(s.at("input_features").dim(1), 128);
    }
    EXPECT_GT(image_tokens + video_tokens + audio_tokens, 0);
    // Media positions: zeroed ids, ignored labels.
    const std::vector<int64_t> ids = sample_ints(s.at("input_ids")), labels = sample_ints(s.at("labels"));
    const std::vector<int64_t> audio_mask =
        omni ? sample_ints(s.at("audio_mask")) : std::vector<int64_t>(ids.size(), 0);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (image_mask[i] + video_mask[i] + audio_mask[i] == 0) continue;
      EXPECT_EQ(ids[i], 0) << "position " << i;
      EXPECT_EQ(labels[i], kIgnoreIndex) << "position " << i;
    }
    EXPECT_EQ(s.at("position_ids").dim(0), 3);
    EXPECT_EQ(s.at("position_ids").dim(1), static_cast<int64_t>(ids.size()));
  }
}

// tests/fixtures/media/processor/processor.{json,safetensors}, written by scripts/media_fixtures/processor.py with
// transformers 5.17 on the GPU machine (issue #9); VEOMNI_PROCESSOR_FIXTURE_DIR points at another fixture.
TEST(MediaProcessorE2E, MatchesTransformersProcessor) {
  const Tokenizer* tokenizer = testing::qwen3_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const std::string dir = fixture_dir();
  for (const char* file : {"processor.json", "processor.safetensors"})
    ASSERT_TRUE(std::filesystem::exists(dir + "/" + file))
        << "missing fixture " << dir << "/" << file
        << ": run scripts/media_fixtures/processor.py where transformers 5.17 is";
  std::ifstream in(dir + "/processor.json");
  const json fixture = json::parse(in);
  ASSERT_EQ(fixture.at("format"), "veomni-media-processor-fixture/1");
  EXPECT_TRUE(fixture.at("failed").empty()) << "cases that failed in transformers: " << fixture.at("failed").dump();
  const SafetensorsReader expected(dir + "/processor.safetensors");

  const std::vector<json> records = read_conversations();
  size_t compared = 0;
  for (const json& record : records) {
    const std::string name = record.at("name").get<std::string>();
    const auto want = std::find_if(fixture.at("cases").begin(), fixture.at("cases").end(),
                                   [&](const json& c) { return c.at("name") == name; });
    if (want == fixture.at("cases").end()) {
      ADD_FAILURE() << name << ": not in " << dir << "/processor.json";
      continue;
    }
    const EncodedMultimodal ours = encode(*tokenizer, record);
    expect_matches_hf(*want, ours, multimodal_token_ids(*tokenizer), expected);
    ++compared;
  }
  EXPECT_EQ(compared, records.size());
}

}  // namespace
}  // namespace veomni
