// Preference and rollout keys in the dataset format: the version a file gets, and the checks on open and on read
// that name the file, the sample and the key.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "data/dataset_objective_keys.h"
#include "data/dataset_reader.h"
#include "data/dataset_writer.h"
#include "data/dummy_data.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/expect_error.h"

namespace veomni {
namespace {

using DatasetObjectiveKeys = veomni::testing::ScratchDir;

Tensor keys_ids_tensor(const std::vector<int64_t>& v) {
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
}
Tensor keys_f32_tensor(const std::vector<float>& v) { return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}); }

DatasetInfo keys_dataset_info() {
  DatasetInfo i;
  i.producer = "test";
  return i;
}

Sample rollout(int64_t length, float value = 0.5f) {
  Sample s;
  s["input_ids"] = keys_ids_tensor(std::vector<int64_t>(static_cast<size_t>(length), 3));
  for (const char* key : kRolloutKeys) s[key] = keys_f32_tensor(std::vector<float>(static_cast<size_t>(length), value));
  return s;
}

Sample pair(int64_t chosen_length) {
  Sample s;
  s["input_ids"] = keys_ids_tensor({1, 2, 3, 4, 5});
  s["labels"] = keys_ids_tensor({-100, 2, 3, -100, 5});
  s["position_ids"] = keys_ids_tensor({0, 1, 2, 0, 1});
  s[kChosenLengthKey] = keys_ids_tensor({chosen_length});
  s[kRefChosenLogpsKey] = keys_f32_tensor({-1.0f});
  s[kRefRejectedLogpsKey] = keys_f32_tensor({-2.0f});
  return s;
}

void write(const std::string& file, const std::vector<Sample>& samples) {
  DatasetWriter writer(file, keys_dataset_info());
  for (const Sample& s : samples) writer.append(s);
  writer.close();
}

using veomni::testing::expect_input_error;

TEST_F(DatasetObjectiveKeys, FormatVersionFollowsTheKeys) {
  Sample sft;
  sft["input_ids"] = keys_ids_tensor({1, 2});
  write(path("sft.h5"), {sft});
  write(path("rollout.h5"), {rollout(4)});
  write(path("pair.h5"), {pair(3)});
  EXPECT_EQ(DatasetReader(path("sft.h5")).info().format_version, 1);
  EXPECT_EQ(DatasetReader(path("rollout.h5")).info().format_version, 2);
  EXPECT_EQ(DatasetReader(path("pair.h5")).info().format_version, 2);
  EXPECT_EQ(kDatasetFormatVersion, 2);
}

TEST_F(DatasetObjectiveKeys, RolloutAndPairKeysRoundTrip) {
  write(path("r.h5"), {rollout(4, 0.25f), rollout(6, -0.75f)});
  const DatasetReader reader(path("r.h5"));
  const Sample s = reader.read(1);
  for (const char* key : kRolloutKeys) {
    ASSERT_EQ(s.at(key).dtype(), DType::F32) << key;
    ASSERT_EQ(s.at(key).shape(), Shape{6}) << key;
    EXPECT_EQ(s.at(key).data<float>()[5], -0.75f);
  }
  write(path("p.h5"), {pair(3), pair(1)});
  const Sample p = DatasetReader(path("p.h5")).read(1);
  EXPECT_EQ(p.at(kChosenLengthKey).data<int64_t>()[0], 1);
  EXPECT_EQ(p.at(kRefRejectedLogpsKey).data<float>()[0], -2.0f);
}

TEST_F(DatasetObjectiveKeys, WrongLengthNamesFileSampleAndKey) {
  Sample bad = rollout(5);
  bad["advantages"] = keys_f32_tensor({1, 2, 3});
  write(path("r.h5"), {rollout(4), bad});
  expect_input_error([&] { DatasetReader reader(path("r.h5")); },
                     {path("r.h5"), "sample 1: advantages has 3 entries but input_ids 5 tokens"});
}

TEST_F(DatasetObjectiveKeys, RolloutKeysMustBeF32) {
  Sample bad = rollout(3);
  bad["returns"] = keys_ids_tensor({1, 2, 3});
  write(path("r.h5"), {bad});
  expect_input_error([&] { DatasetReader reader(path("r.h5")); },
                     {path("r.h5"), "key 'returns' is i64[L], expected f32[L]"});
}

TEST_F(DatasetObjectiveKeys, NonFiniteValueNamesFileSampleAndKey) {
  Sample bad = rollout(4);
  bad["old_log_probs"].data<float>()[2] = std::numeric_limits<float>::quiet_NaN();
  write(path("r.h5"), {rollout(4), bad});
  const DatasetReader reader(path("r.h5"));
  reader.read(0);
  expect_input_error([&] { reader.read(1); }, {path("r.h5") + " sample 1: key 'old_log_probs'[2] = nan is not finite"});
}

TEST_F(DatasetObjectiveKeys, RequiredKeysAreNamed) {
  Sample partial = rollout(4);
  partial.erase("old_log_probs");
  write(path("r.h5"), {partial});
  const DatasetReader reader(path("r.h5"));
  require_dataset_keys(reader, {"advantages", "input_ids"}, "train.objective ppo_actor");
  expect_input_error(
      [&] { require_dataset_keys(reader, {"advantages", "old_log_probs"}, "train.objective ppo_actor"); },
      {path("r.h5") + ": no key 'old_log_probs', which train.objective ppo_actor needs (keys: advantages"});
}

TEST_F(DatasetObjectiveKeys, ChosenLengthOutsideThePairIsRefused) {
  write(path("p.h5"), {pair(3), pair(5)});
  expect_input_error([&] { DatasetReader reader(path("p.h5")); },
                     {path("p.h5"), "sample 1: key 'chosen_length' is 5, expected 1 to 4"});
}

TEST_F(DatasetObjectiveKeys, PairKeysHoldOneValuePerSample) {
  Sample bad = pair(3);
  bad[kRefChosenLogpsKey] = keys_f32_tensor({-1.0f, -2.0f});
  write(path("p.h5"), {pair(3), bad});
  expect_input_error([&] { DatasetReader reader(path("p.h5")); },
                     {path("p.h5"), "sample 1: key 'ref_chosen_logps' has 2 entries, expected 1"});
  Sample orphan = pair(3);
  orphan.erase(kChosenLengthKey);
  write(path("o.h5"), {orphan});
  expect_input_error([&] { DatasetReader reader(path("o.h5")); },
                     {path("o.h5"), "key 'ref_chosen_logps' without 'chosen_length'"});
}

TEST_F(DatasetObjectiveKeys, DummyPreferenceAndRolloutAreDeterministicAndValid) {
  for (DummyType type : {DummyType::Preference, DummyType::Rollout}) {
    DummyLayout layout = dummy_layout(type, 10);
    layout.ref_logps = type == DummyType::Preference;
    const Sample a = make_dummy_sample(layout, 3, 7), b = make_dummy_sample(layout, 3, 7);
    const Sample c = make_dummy_sample(layout, 4, 7);
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [key, tensor] : a) {
      ASSERT_EQ(tensor.nbytes(), b.at(key).nbytes()) << key;
      EXPECT_EQ(std::memcmp(tensor.raw_data(), b.at(key).raw_data(), tensor.nbytes()), 0) << key;
    }
    EXPECT_NE(std::memcmp(a.at("input_ids").raw_data(), c.at("input_ids").raw_data(), a.at("input_ids").nbytes()), 0);
  }
  DummyLayout layout = dummy_layout(DummyType::Preference, 10);
  const Sample p = make_dummy_sample(layout, 1, 0);
  EXPECT_EQ(p.at(kChosenLengthKey).data<int64_t>()[0], 5);
  EXPECT_EQ(p.count(kRefChosenLogpsKey), 0u);
  const int64_t* ids = p.at("input_ids").data<int64_t>();
  const int64_t* labels = p.at("labels").data<int64_t>();
  const int64_t* positions = p.at("position_ids").data<int64_t>();
  // Prompt of 2 tokens shared by both sequences, labels off on it; positions 0..4 twice.
  EXPECT_EQ(ids[0], ids[5]);
  EXPECT_EQ(ids[1], ids[6]);
  for (int64_t i : {0, 1, 5, 6}) EXPECT_EQ(labels[i], -100);
  for (int64_t i : {2, 3, 4, 7, 8, 9}) EXPECT_EQ(labels[i], ids[i]);
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(positions[i], i % 5);
  const Sample r = make_dummy_sample(dummy_layout(DummyType::Rollout, 10), 1, 0);
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(r.at("advantages").data<float>()[i], 0.0f);
  for (int64_t i = 5; i < 10; ++i) EXPECT_LE(r.at("old_log_probs").data<float>()[i], 0.0f);
  expect_input_error([] { dummy_layout(DummyType::Preference, 3); }, {"--seq-len 3 is too short for preference"});
}

// Multimodal dummy pairs: the prompt (its media included) is the same in both halves, the answers differ, the media
// are stored once per half, and positions restart at the rejected half in every stream.
TEST_F(DatasetObjectiveKeys, DummyMultimodalPairsHoldThePromptsMediaInBothHalves) {
  DummyLayout layout = dummy_layout(DummyType::Preference, 120, DummyType::Qwen3VL);
  EXPECT_STREQ(layout.dataset_kind(), "vl");
  EXPECT_EQ(layout.chosen_tokens, 60);
  EXPECT_EQ(layout.prompt_tokens, 54);  // a 6-token head, 8 image and 40 video tokens
  EXPECT_EQ(layout.image_begin, 6);
  EXPECT_EQ(layout.video_begin, 14);
  layout.ref_logps = true;
  const Sample p = make_dummy_sample(layout, 5, 2);
  EXPECT_EQ(p.count(kRefRejectedLogpsKey), 1u);
  const int64_t* ids = p.at("input_ids").data<int64_t>();
  const int64_t* labels = p.at("labels").data<int64_t>();
  const bool* image = p.at("image_mask").data<bool>();
  const bool* video = p.at("video_mask").data<bool>();
  for (int64_t i = 0; i < 54; ++i) {
    EXPECT_EQ(ids[i], ids[60 + i]) << i;
    EXPECT_EQ(labels[i], -100) << i;
    EXPECT_EQ(labels[60 + i], -100) << i;
    EXPECT_EQ(image[i], i >= 6 && i < 14) << i;
    EXPECT_EQ(image[60 + i], image[i]) << i;
    EXPECT_EQ(video[60 + i], video[i]) << i;
    if (image[i] || video[i]) {
      EXPECT_EQ(ids[i], 0) << i;
    }
  }
  bool answers_differ = false;
  for (int64_t i = 54; i < 60; ++i) {
    EXPECT_EQ(labels[i], ids[i]);
    answers_differ = answers_differ || ids[i] != ids[60 + i];
  }
  EXPECT_TRUE(answers_differ);
  const Tensor& pixels = p.at("pixel_values");
  ASSERT_EQ(pixels.shape(), (Shape{64, 1536}));
  EXPECT_EQ(std::memcmp(pixels.data<float>(), pixels.data<float>() + 32 * 1536, 32 * 1536 * sizeof(float)), 0);
  const Tensor& positions = p.at("position_ids");
  ASSERT_EQ(positions.shape(), (Shape{3, 120}));
  for (int64_t st = 0; st < 3; ++st) {
    EXPECT_EQ(positions.data<int64_t>()[st * 120 + 59], 59);
    EXPECT_EQ(positions.data<int64_t>()[st * 120 + 60], 0);
  }
  const Sample omni = make_dummy_sample(dummy_layout(DummyType::Preference, 320, DummyType::Qwen3Omni), 5, 2);
  EXPECT_EQ(omni.at("position_ids").dtype(), DType::F32);
  EXPECT_EQ(omni.at("input_features").dim(0), 1600);
  EXPECT_EQ(omni.at("audio_feature_lengths").numel(), 4);
  expect_input_error([] { dummy_layout(DummyType::Preference, 99, DummyType::Qwen3VL); },
                     {"--seq-len 99 is too short for qwen3vl preference pairs", "--seq-len 100 or more"});
  expect_input_error([] { dummy_layout(DummyType::Text, 200, DummyType::Qwen3VL); },
                     {"--media needs --type preference or rollout"});
  expect_input_error([] { dummy_layout(DummyType::Preference, 200, DummyType::Qwen2VL); },
                     {"--media must be qwen3vl or qwen3omni"});
}

// A multimodal rollout is the family's dummy sample: labels -100 on its media and on the first half of its text
// tokens, the rollout values on the other text tokens and 0 wherever nothing is predicted.
TEST_F(DatasetObjectiveKeys, DummyMultimodalRolloutsHoldValuesOnTheResponseTextOnly) {
  for (DummyType family : {DummyType::Qwen3VL, DummyType::Qwen3Omni}) {
    const DummyLayout layout = dummy_layout(DummyType::Rollout, 336, family);
    EXPECT_STREQ(layout.dataset_kind(), family == DummyType::Qwen3VL ? "vl" : "omni");
    const Sample s = make_dummy_sample(layout, 3, 1);
    const int64_t length = s.at("input_ids").numel();
    const int64_t* labels = s.at("labels").data<int64_t>();
    std::vector<bool> media(static_cast<size_t>(length), false);
    for (const char* mask : {"image_mask", "video_mask", "audio_mask"})
      if (s.count(mask))
        for (int64_t i = 0; i < length; ++i) media[static_cast<size_t>(i)] = media[static_cast<size_t>(i)] || s.at(mask).data<bool>()[i];
    int64_t response = 0, text = 0;
    for (int64_t i = 0; i < length; ++i) {
      const bool predicted = labels[i] != -100;  // the ignore index
      if (media[static_cast<size_t>(i)]) {
        EXPECT_FALSE(predicted) << i;
      }
      text += !media[static_cast<size_t>(i)];
      response += predicted;
      for (const char* key : kRolloutKeys) {
        if (!predicted) {
          EXPECT_EQ(s.at(key).data<float>()[i], 0.0f) << key << " " << i;
        }
      }
    }
    EXPECT_EQ(response, text - text / 2);
    EXPECT_GT(response, 0);
  }
}


}  // namespace
}  // namespace veomni
