// Unit tests of the dataset format: round trips of every dtype and shape, shards, lengths, atomic writes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <thread>

#include "data/dataset_files.h"
#include "data/dataset_reader.h"
#include "data/dataset_writer.h"
#include "tests/common/scratch_dir.h"

using namespace veomni;
namespace fs = std::filesystem;

namespace {

using DatasetTest = veomni::testing::ScratchDir;

DatasetInfo text_info() {
  DatasetInfo info;
  info.kind = "text";
  info.producer = "test";
  info.producer_version = "1.2.3";
  info.packing = "none";
  info.max_seq_len = 64;
  info.tokenizer = "qwen3";
  return info;
}

// Deterministic values of any dtype: element i of sample s.
Tensor pattern(DType dtype, const Shape& shape, int64_t s) {
  Tensor t = Tensor::empty(shape, dtype);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t v = (s * 131 + i * 7) % 251;
    switch (dtype) {
      case DType::F32: t.data<float>()[i] = static_cast<float>(v) * 0.5f - 3.25f; break;
      case DType::BF16: t.data<bf16>()[i] = float_to_bf16(static_cast<float>(v) - 100.0f); break;
      case DType::F16: t.data<f16>()[i] = float_to_f16(static_cast<float>(v) / 8.0f); break;
      case DType::I32: t.data<int32_t>()[i] = static_cast<int32_t>(v * 1000 - 77777); break;
      case DType::I64: t.data<int64_t>()[i] = v * 10000000000ll - 5; break;
      case DType::U8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
      case DType::Bool: t.data<bool>()[i] = v % 3 == 0; break;
    }
  }
  return t;
}

void expect_same_tensor(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  if (expected.numel() > 0) {
    EXPECT_EQ(std::memcmp(actual.raw_data(), expected.raw_data(), expected.nbytes()), 0) << what;
  }
}

void expect_same_sample(const Sample& actual, const Sample& expected, int64_t index) {
  ASSERT_EQ(actual.size(), expected.size()) << "sample " << index;
  for (const auto& [key, tensor] : expected) {
    ASSERT_TRUE(actual.count(key)) << key;
    expect_same_tensor(actual.at(key), tensor, fmt::format("sample {} key {}", index, key));
  }
}

// Sample s: input_ids of length lengths[s], a (3, L) position_ids, pixel rows, a (n, 3) grid.
Sample mixed_sample(int64_t s, int64_t length) {
  Sample sample;
  sample["input_ids"] = pattern(DType::I64, {length}, s);
  sample["position_ids"] = pattern(DType::I64, {3, length}, s + 1);
  sample["pixel_values"] = pattern(DType::F32, {(s % 4) * 2, 6}, s);
  sample["image_grid_thw"] = pattern(DType::I64, {s % 3, 3}, s);
  sample["image_mask"] = pattern(DType::Bool, {length}, s);
  return sample;
}

std::vector<Sample> write_mixed(const std::string& file, const std::vector<int64_t>& lengths,
                                DatasetWriterOptions options = {}) {
  std::vector<Sample> samples;
  DatasetWriter writer(file, text_info(), options);
  for (size_t s = 0; s < lengths.size(); ++s) {
    samples.push_back(mixed_sample(static_cast<int64_t>(s), lengths[s]));
    writer.append(samples.back());
  }
  writer.close();
  return samples;
}

}  // namespace

TEST_F(DatasetTest, EveryDtypeRoundTrips) {
  const std::vector<DType> dtypes = {DType::F32, DType::BF16, DType::F16, DType::I32,
                                     DType::I64, DType::U8,   DType::Bool};
  const std::vector<int64_t> lengths = {5, 0, 17, 1};
  std::vector<Sample> samples;
  {
    DatasetWriter writer(path("all.h5"), text_info());
    for (size_t s = 0; s < lengths.size(); ++s) {
      Sample sample;
      for (DType d : dtypes)
        sample[std::string("key_") + dtype_name(d)] = pattern(d, {lengths[s]}, static_cast<int64_t>(s));
      writer.append(sample);
      samples.push_back(sample);
    }
    writer.close();
  }
  DatasetReader reader(path("all.h5"));
  ASSERT_EQ(reader.num_samples(), 4);
  ASSERT_EQ(reader.keys().size(), dtypes.size());
  for (const KeyInfo& key : reader.keys()) {
    EXPECT_EQ(key.name, std::string("key_") + dtype_name(key.dtype));
    EXPECT_EQ(key.shape, (Shape{-1}));
    EXPECT_EQ(key.var_axis, 0);
  }
  for (int64_t s = 0; s < 4; ++s) expect_same_sample(reader.read(s), samples[static_cast<size_t>(s)], s);
}

TEST_F(DatasetTest, HeaderRoundTrips) {
  write_mixed(path("h.h5"), {3, 4});
  DatasetReader reader(path("h.h5"));
  const DatasetInfo& info = reader.info();
  EXPECT_EQ(info.kind, "text");
  EXPECT_EQ(info.producer, "test");
  EXPECT_EQ(info.producer_version, "1.2.3");
  EXPECT_EQ(info.packing, "none");
  EXPECT_EQ(info.max_seq_len, 64);
  EXPECT_EQ(info.tokenizer, "qwen3");
  EXPECT_EQ(info.format_version, 1);  // SFT keys only: readable by version-1 readers
  ASSERT_EQ(reader.shards().size(), 1u);
  EXPECT_EQ(reader.shards()[0].num_samples, 2);
  EXPECT_EQ(reader.shards()[0].num_shards, 1);
  EXPECT_EQ(reader.shards()[0].total_samples, 2);
}

TEST_F(DatasetTest, TwoDimensionalKeysKeepTheirFixedAxis) {
  const std::vector<int64_t> lengths = {4, 9, 0, 2, 7};
  const auto samples = write_mixed(path("m.h5"), lengths);
  DatasetReader reader(path("m.h5"));
  std::map<std::string, KeyInfo> keys;
  for (const KeyInfo& key : reader.keys()) keys[key.name] = key;
  EXPECT_EQ(keys.at("position_ids").shape, (Shape{3, -1}));
  EXPECT_EQ(keys.at("position_ids").var_axis, 1);
  EXPECT_EQ(keys.at("position_ids").describe(), "i64[3, L]");
  EXPECT_EQ(keys.at("pixel_values").shape, (Shape{-1, 6}));
  EXPECT_EQ(keys.at("pixel_values").var_axis, 0);
  EXPECT_EQ(keys.at("image_grid_thw").describe(), "i64[L, 3]");
  EXPECT_EQ(keys.at("image_mask").dtype, DType::Bool);
  for (int64_t s = 0; s < 5; ++s) {
    expect_same_sample(reader.read(s), samples[static_cast<size_t>(s)], s);
    EXPECT_EQ(reader.sequence_length(s), lengths[static_cast<size_t>(s)]);
  }
  EXPECT_EQ(reader.read(1).at("position_ids").shape(), (Shape{3, 9}));
  EXPECT_EQ(reader.read(2).at("position_ids").shape(), (Shape{3, 0}));
}

TEST_F(DatasetTest, SamplesStraddleChunkBoundaries) {
  DatasetWriterOptions options;
  options.chunk_bytes = 64;  // 8 tokens per input_ids chunk, 2 steps of position_ids (3 x 8 bytes) per chunk
  std::vector<int64_t> lengths;
  for (int64_t s = 0; s < 60; ++s) lengths.push_back((s * 37) % 23);
  const auto samples = write_mixed(path("c.h5"), lengths, options);
  DatasetReader reader(path("c.h5"));
  ASSERT_EQ(reader.num_samples(), 60);
  for (int64_t s = 59; s >= 0; --s) expect_same_sample(reader.read(s), samples[static_cast<size_t>(s)], s);
}

TEST_F(DatasetTest, ExplicitVarAxisOverridesTheDefault) {
  DatasetWriterOptions options;
  options.var_axes["frames"] = 1;
  {
    DatasetWriter writer(path("v.h5"), text_info(), options);
    writer.append({{"input_ids", pattern(DType::I64, {2}, 0)}, {"frames", pattern(DType::F32, {2, 5, 4}, 0)}});
    writer.append({{"input_ids", pattern(DType::I64, {3}, 1)}, {"frames", pattern(DType::F32, {2, 1, 4}, 1)}});
    writer.close();
  }
  DatasetReader reader(path("v.h5"));
  EXPECT_EQ(reader.keys()[0].name, "frames");
  EXPECT_EQ(reader.keys()[0].shape, (Shape{2, -1, 4}));
  expect_same_tensor(reader.read(0).at("frames"), pattern(DType::F32, {2, 5, 4}, 0), "frames 0");
  expect_same_tensor(reader.read(1).at("frames"), pattern(DType::F32, {2, 1, 4}, 1), "frames 1");
}

TEST_F(DatasetTest, ReadsASubsetOfKeys) {
  const auto samples = write_mixed(path("s.h5"), {3, 5});
  DatasetReader reader(path("s.h5"));
  const Sample sample = reader.read(1, {"input_ids", "image_mask"});
  ASSERT_EQ(sample.size(), 2u);
  expect_same_tensor(sample.at("input_ids"), samples[1].at("input_ids"), "input_ids");
  EXPECT_TRUE(reader.has_key("pixel_values"));
  EXPECT_FALSE(reader.has_key("labels"));
}

TEST_F(DatasetTest, ShardedSetReadsAsOneDataset) {
  std::vector<Sample> samples;
  std::vector<int64_t> lengths = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  {
    ShardedDatasetWriter writer(path("train.h5"), 10, 3, text_info());
    for (size_t s = 0; s < lengths.size(); ++s) {
      samples.push_back(mixed_sample(static_cast<int64_t>(s), lengths[s]));
      writer.append(samples.back());
    }
    writer.close();
    EXPECT_EQ(writer.paths(),
              (std::vector<std::string>{path("train-00000-of-00003.h5"), path("train-00001-of-00003.h5"),
                                        path("train-00002-of-00003.h5")}));
  }
  EXPECT_FALSE(fs::exists(path("train.h5")));
  for (const std::string& given :
       {path("train-00001-of-00003.h5"), dir_.string(), path("train-*-of-*.h5"), path("train.h5")}) {
    DatasetReader reader(given);
    ASSERT_EQ(reader.num_samples(), 10) << given;
    ASSERT_EQ(reader.shards().size(), 3u);
    EXPECT_EQ(reader.shards()[0].first_sample, 0);
    EXPECT_EQ(reader.shards()[1].first_sample, 3);
    EXPECT_EQ(reader.shards()[2].first_sample, 6);
    EXPECT_EQ(reader.shards()[2].num_samples, 4);
    EXPECT_EQ(reader.shards()[1].shard_index, 1);
    for (int64_t s = 0; s < 10; ++s) {
      expect_same_sample(reader.read(s), samples[static_cast<size_t>(s)], s);
      EXPECT_EQ(reader.sequence_length(s), lengths[static_cast<size_t>(s)]);
    }
  }
}

TEST_F(DatasetTest, ConcurrentReadsAgree) {
  std::vector<int64_t> lengths;
  for (int64_t s = 0; s < 40; ++s) lengths.push_back(20 + s % 7);
  const auto samples = write_mixed(path("t.h5"), lengths);
  const DatasetReader reader(path("t.h5"));
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int64_t s = t; s < 40; s += 2) {
        const Sample sample = reader.read(s);
        const Tensor& expected = samples[static_cast<size_t>(s)].at("pixel_values");
        const Tensor& actual = sample.at("pixel_values");
        if (actual.shape() != expected.shape() ||
            (expected.numel() > 0 && std::memcmp(actual.raw_data(), expected.raw_data(), expected.nbytes()) != 0))
          ++mismatches;
      }
    });
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_F(DatasetTest, EmptyDatasetHasNoKeys) {
  {
    ShardedDatasetWriter writer(path("empty.h5"), 0, 1, text_info());
    writer.close();
  }
  DatasetReader reader(path("empty.h5"));
  EXPECT_EQ(reader.num_samples(), 0);
  EXPECT_TRUE(reader.keys().empty());
}

TEST_F(DatasetTest, NothingAppearsUnderTheFinalNameBeforeClose) {
  DatasetWriter writer(path("a.h5"), text_info());
  writer.append(mixed_sample(0, 4));
  EXPECT_FALSE(fs::exists(path("a.h5")));
  EXPECT_TRUE(fs::exists(path("a.h5") + ".tmp-" + std::to_string(getpid())));
  writer.close();
  EXPECT_TRUE(fs::exists(path("a.h5")));
  EXPECT_FALSE(fs::exists(path("a.h5") + ".tmp-" + std::to_string(getpid())));
}

TEST_F(DatasetTest, StreamsToDiskWhileAppending) {
  // 8 MiB of incompressible floats: whole chunks reach the temporary file long before close().
  DatasetWriterOptions options;
  options.compression_level = 0;
  DatasetWriter writer(path("big.h5"), text_info(), options);
  const std::string temp = path("big.h5") + ".tmp-" + std::to_string(getpid());
  for (int64_t s = 0; s < 32; ++s) writer.append({{"x", pattern(DType::F32, {256, 256}, s)}});
  EXPECT_GT(fs::file_size(temp), 4u << 20);
  writer.close();
  EXPECT_EQ(DatasetReader(path("big.h5")).num_samples(), 32);
}

TEST_F(DatasetTest, WriterDestroyedWithoutCloseLeavesNoFile) {
  {
    DatasetWriter writer(path("a.h5"), text_info());
    writer.append(mixed_sample(0, 4));
  }
  {
    ShardedDatasetWriter writer(path("b.h5"), 4, 2, text_info());
    for (int64_t s = 0; s < 3; ++s) writer.append(mixed_sample(s, 2));
  }
  EXPECT_TRUE(fs::is_empty(dir_)) << "left: " << fs::directory_iterator(dir_)->path();
}

TEST(DatasetFormat, ShardNames) {
  EXPECT_EQ(shard_file_name("d/train", 2, 4), "d/train-00002-of-00004.h5");
  const auto parsed = parse_shard_file_name("d/train-00002-of-00004.h5");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->stem, "d/train");
  EXPECT_EQ(parsed->index, 2);
  EXPECT_EQ(parsed->count, 4);
  EXPECT_FALSE(parse_shard_file_name("d/train-00004-of-00004.h5").has_value());
  EXPECT_FALSE(parse_shard_file_name("d/train.h5").has_value());
  EXPECT_EQ(sharded_dataset_paths("x/a.h5", 1), (std::vector<std::string>{"x/a.h5"}));
  EXPECT_EQ(sharded_dataset_paths("x/a.h5", 2),
            (std::vector<std::string>{"x/a-00000-of-00002.h5", "x/a-00001-of-00002.h5"}));
}

TEST(DatasetFormat, WildcardMatch) {
  EXPECT_TRUE(wildcard_match("train-*-of-*.h5", "train-00001-of-00004.h5"));
  EXPECT_TRUE(wildcard_match("*", ""));
  EXPECT_TRUE(wildcard_match("a?c", "abc"));
  EXPECT_FALSE(wildcard_match("a?c", "ac"));
  EXPECT_FALSE(wildcard_match("train-*.h5", "val-00001.h5"));
  EXPECT_TRUE(wildcard_match("*a*b", "xxaxxab"));
}

TEST(DatasetFormat, DefaultVarAxis) {
  EXPECT_EQ(default_var_axis("position_ids", 2), 1);
  EXPECT_EQ(default_var_axis("position_ids", 1), 0);
  EXPECT_EQ(default_var_axis("pixel_values", 2), 0);
  EXPECT_EQ(default_var_axis("image_grid_thw", 2), 0);
}
