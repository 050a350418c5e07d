// Unit tests of the dummy datasets: VeOmni's layouts per type and seq_len, the audio formula, determinism.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "data/audio_length.h"
#include "data/constants.h"
#include "data/dataset_reader.h"
#include "data/dummy_data.h"
#include "test_ckpt_util.h"

using namespace veomni;
namespace fs = std::filesystem;

namespace {

using veomni::test::same_bytes;

int64_t count_true(const Tensor& mask) {
  int64_t n = 0;
  for (int64_t i = 0; i < mask.numel(); ++i) n += mask.data<bool>()[i];
  return n;
}

// First and one-past-last true position of a mask holding one contiguous run.
std::pair<int64_t, int64_t> run_of(const Tensor& mask) {
  int64_t begin = -1, end = -1;
  for (int64_t i = 0; i < mask.numel(); ++i)
    if (mask.data<bool>()[i]) {
      if (begin < 0) begin = i;
      end = i + 1;
    }
  EXPECT_EQ(count_true(mask), end - begin) << "mask is not one run";
  return {begin, end};
}

std::vector<std::string> keys_of(const Sample& sample) {
  std::vector<std::string> keys;
  for (const auto& entry : sample) keys.push_back(entry.first);
  return keys;
}

void expect_text_keys(const Sample& sample, int64_t length) {
  const Tensor& ids = sample.at("input_ids");
  const Tensor& labels = sample.at("labels");
  ASSERT_EQ(ids.shape(), (Shape{length}));
  EXPECT_EQ(ids.dtype(), DType::I64);
  EXPECT_EQ(labels.data<int64_t>()[0], kIgnoreIndex);
  for (int64_t i = 0; i < length; ++i) {
    EXPECT_GE(ids.data<int64_t>()[i], 0);
    EXPECT_LT(ids.data<int64_t>()[i], 1024);
    if (i > 0) {
      EXPECT_EQ(labels.data<int64_t>()[i], ids.data<int64_t>()[i]);
    }
    EXPECT_EQ(sample.at("attention_mask").data<int64_t>()[i], 1);
  }
}

}  // namespace

TEST(AudioLength, MatchesVeOmniFormula) {
  // Values from the Python formula (floor division) in VeOmni's DummyQwen3OmniMoeDataset.
  const std::vector<std::pair<int64_t, int64_t>> cases = {
      {0, 0},    {1, 1},    {2, 1},     {3, 1},      {4, 1},      {5, 1},         {8, 1},
      {9, 2},    {17, 3},   {50, 7},    {99, 13},    {100, 13},   {101, 14},      {150, 20},
      {200, 26}, {400, 52}, {800, 104}, {1000, 130}, {3000, 390}, {123456, 16049}};
  for (const auto& [frames, tokens] : cases) EXPECT_EQ(audio_output_length(frames), tokens) << frames;
  EXPECT_THROW(audio_output_length(-1), InputError);
}

TEST(DummyData, TypeNames) {
  for (DummyType t : {DummyType::Text, DummyType::Qwen2VL, DummyType::Qwen3VL, DummyType::Qwen3Omni})
    EXPECT_EQ(dummy_type_from_name(dummy_type_name(t)), t);
  EXPECT_THROW(dummy_type_from_name("qwen2omni"), InputError);
}

TEST(DummyData, Constants) {
  EXPECT_EQ(kIgnoreIndex, -100);
  EXPECT_EQ(kImageInputIndex, -200);
  EXPECT_EQ(kVideoInputIndex, -300);
  EXPECT_EQ(kAudioInputIndex, -400);
}

TEST(DummyData, TextLayoutAndSample) {
  for (int64_t seq_len : {1, 7, 2048}) {
    const DummyLayout layout = dummy_layout(DummyType::Text, seq_len);
    EXPECT_EQ(layout.length, seq_len);
    EXPECT_STREQ(layout.dataset_kind(), "text");
    const Sample sample = make_dummy_sample(layout, 1, 0);
    EXPECT_EQ(keys_of(sample), (std::vector<std::string>{"attention_mask", "input_ids", "labels", "position_ids"}));
    expect_text_keys(sample, seq_len);
    const Tensor& positions = sample.at("position_ids");
    ASSERT_EQ(positions.shape(), (Shape{seq_len}));
    for (int64_t i = 0; i < seq_len; ++i) EXPECT_EQ(positions.data<int64_t>()[i], i);
  }
}

TEST(DummyData, VisionLanguageLayouts) {
  for (auto [type, patch_dim] : {std::pair{DummyType::Qwen2VL, 1176}, std::pair{DummyType::Qwen3VL, 1536}}) {
    for (int64_t seq_len : {48, 100, 2048}) {
      const DummyLayout layout = dummy_layout(type, seq_len);
      EXPECT_EQ(layout.length, seq_len);
      EXPECT_EQ(layout.text_tokens, seq_len - 48);
      EXPECT_EQ(layout.image_tokens, 8);
      EXPECT_EQ(layout.video_tokens, 40);
      EXPECT_EQ(layout.patch_dim, patch_dim);
      EXPECT_STREQ(layout.dataset_kind(), "vl");

      const Sample sample = make_dummy_sample(layout, 7, 3);
      EXPECT_EQ(keys_of(sample), (std::vector<std::string>{"attention_mask", "image_grid_thw", "image_mask",
                                                           "input_ids", "labels", "pixel_values", "pixel_values_videos",
                                                           "position_ids", "video_grid_thw", "video_mask"}));
      expect_text_keys(sample, seq_len);
      EXPECT_EQ(sample.at("pixel_values").shape(), (Shape{32, patch_dim}));
      EXPECT_EQ(sample.at("pixel_values_videos").shape(), (Shape{160, patch_dim}));
      EXPECT_EQ(sample.at("image_grid_thw").to_float_vector(), (std::vector<float>{1, 4, 4, 1, 4, 4}));
      EXPECT_EQ(sample.at("video_grid_thw").to_float_vector(), (std::vector<float>{10, 4, 4}));
      EXPECT_EQ(run_of(sample.at("image_mask")), (std::pair<int64_t, int64_t>{0, 8}));
      EXPECT_EQ(run_of(sample.at("video_mask")), (std::pair<int64_t, int64_t>{seq_len - 40, seq_len}));
      const Tensor& positions = sample.at("position_ids");
      ASSERT_EQ(positions.shape(), (Shape{3, seq_len}));
      for (int64_t r = 0; r < 3; ++r) EXPECT_EQ(positions.data<int64_t>()[r * seq_len + seq_len - 1], seq_len - 1);
      for (float v : sample.at("pixel_values").to_float_vector()) ASSERT_TRUE(v >= 0.0f && v < 1.0f);
    }
    EXPECT_THROW(dummy_layout(type, 47), InputError);
  }
}

TEST(DummyData, Qwen3OmniLayouts) {
  // L = seq_len - 248 (text) + 8 (image) + 104 (audio) + 40 (video) = seq_len - 96.
  for (auto [seq_len, length] : {std::pair<int64_t, int64_t>{2048, 1952}, {248, 152}, {4096, 4000}, {1000, 904}}) {
    const DummyLayout layout = dummy_layout(DummyType::Qwen3Omni, seq_len);
    EXPECT_EQ(layout.length, length);
    EXPECT_EQ(layout.text_tokens, seq_len - 248);
    EXPECT_EQ(layout.audio_tokens, 104);
    EXPECT_STREQ(layout.dataset_kind(), "omni");

    const Sample sample = make_dummy_sample(layout, 0, 0);
    expect_text_keys(sample, length);
    EXPECT_EQ(sample.size(), 13u);
    const int64_t text = seq_len - 248;
    EXPECT_EQ(run_of(sample.at("image_mask")), (std::pair<int64_t, int64_t>{text, text + 8}));
    EXPECT_EQ(run_of(sample.at("audio_mask")), (std::pair<int64_t, int64_t>{text + 8, text + 112}));
    EXPECT_EQ(run_of(sample.at("video_mask")), (std::pair<int64_t, int64_t>{text + 112, length}));
    EXPECT_EQ(sample.at("input_features").shape(), (Shape{800, 128}));
    EXPECT_EQ(sample.at("input_features").dtype(), DType::F32);
    EXPECT_EQ(sample.at("audio_feature_lengths").to_float_vector(), (std::vector<float>{400, 400}));
    EXPECT_EQ(sample.at("pixel_values").shape(), (Shape{32, 1536}));
    EXPECT_EQ(sample.at("position_ids").shape(), (Shape{3, length}));
    EXPECT_EQ(sample.at("position_ids").dtype(), DType::F32);
    EXPECT_EQ(sample.at("position_ids").item_as_double(2 * length + length - 1), static_cast<double>(length - 1));
  }
  EXPECT_THROW(dummy_layout(DummyType::Qwen3Omni, 247), InputError);
}

TEST(DummyData, DeterministicBySeedAndIndex) {
  const DummyLayout layout = dummy_layout(DummyType::Qwen3Omni, 300);
  const Sample a = make_dummy_sample(layout, 42, 5);
  const Sample b = make_dummy_sample(layout, 42, 5);
  for (const auto& [key, tensor] : a) EXPECT_TRUE(same_bytes(tensor, b.at(key))) << key;
  const Sample other_seed = make_dummy_sample(layout, 43, 5);
  const Sample other_index = make_dummy_sample(layout, 42, 6);
  for (const char* key : {"input_ids", "pixel_values", "pixel_values_videos", "input_features"}) {
    EXPECT_FALSE(same_bytes(a.at(key), other_seed.at(key))) << key;
    EXPECT_FALSE(same_bytes(a.at(key), other_index.at(key))) << key;
  }
}

TEST(DummyData, PinnedRandomStream) {
  // Our own xoshiro256** stream (values checked against an independent Python model of it): they must not change
  // between compilers, standard libraries or releases.
  const Sample sample = make_dummy_sample(dummy_layout(DummyType::Text, 6), 0, 0);
  const int64_t* ids = sample.at("input_ids").data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(ids, ids + 6), (std::vector<int64_t>{762, 767, 684, 23, 220, 56}));
}

TEST(DummyData, WritesADatasetThatReadsBack) {
  const fs::path dir = fs::path(::testing::TempDir()) / fmt::format("veomni_dummy_{}", getpid());
  fs::remove_all(dir);
  DummyDatasetOptions options;
  options.type = DummyType::Qwen3VL;
  options.seq_len = 64;
  options.num_samples = 5;
  options.num_shards = 2;
  options.seed = 9;
  options.out = (dir / "vl.h5").string();
  const DummyDatasetSummary summary = write_dummy_dataset(options);
  EXPECT_EQ(summary.num_samples, 5);
  EXPECT_EQ(summary.tokens, 5 * 64);
  ASSERT_EQ(summary.files.size(), 2u);
  EXPECT_EQ(summary.files[1], (dir / "vl-00001-of-00002.h5").string());
  EXPECT_EQ(summary.bytes, fs::file_size(summary.files[0]) + fs::file_size(summary.files[1]));

  DatasetReader reader((dir / "vl.h5").string());
  EXPECT_EQ(reader.num_samples(), 5);
  EXPECT_EQ(reader.info().kind, "vl");
  EXPECT_EQ(reader.info().producer, "veomni-dummy-data");
  EXPECT_EQ(reader.info().max_seq_len, 64);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(reader.sequence_length(i), 64);
    const Sample expected = make_dummy_sample(summary.layout, 9, i);
    const Sample actual = reader.read(i);
    for (const auto& [key, tensor] : expected) EXPECT_TRUE(same_bytes(actual.at(key), tensor)) << key << " " << i;
  }
  fs::remove_all(dir);
}
