// Unit tests of HF weight directories: shard planning, index contents, stale files, index validation, size strings.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/tensor.h"
#include "io/hf_checkpoint.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "test_ckpt_util.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/expect_error.h"

using namespace veomni;
namespace fs = std::filesystem;

namespace {

class HfCheckpoint : public veomni::testing::ScratchDir {
 protected:
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

using veomni::test::same_bytes;
using veomni::testing::expect_input_error;

Tensor patterned(const Shape& shape, DType dtype, int seed) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>((i * 13 + seed) % 251);
  return t;
}

using Named = std::vector<std::pair<std::string, Tensor>>;

void save(const std::string& dir, uint64_t max_shard_bytes, const Named& tensors) {
  HfCheckpointWriter writer(dir, max_shard_bytes);
  for (const auto& [name, t] : tensors) writer.declare(name, t.dtype(), t.shape());
  for (const auto& [name, t] : tensors) writer.write(name, t);
  writer.finish();
}

// Four f32 tensors of 40 bytes each (names deliberately not in sorted order).
Named four_tensors() {
  return {{"model.layers.1.w", patterned({10}, DType::F32, 1)},
          {"model.embed_tokens.weight", patterned({2, 5}, DType::F32, 2)},
          {"model.layers.0.w", patterned({5, 2}, DType::F32, 3)},
          {"lm_head.weight", patterned({20}, DType::BF16, 4)}};
}

}  // namespace

TEST(ByteSize, ParsesHuggingFaceStyleSizes) {
  EXPECT_EQ(parse_byte_size("5GB"), 5'000'000'000u);
  EXPECT_EQ(parse_byte_size("500MB"), 500'000'000u);
  EXPECT_EQ(parse_byte_size("1.5GiB"), 1'610'612'736u);
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size(" 10 KiB "), 10'240u);
  EXPECT_EQ(parse_byte_size("2gb"), 2'000'000'000u);
  EXPECT_EQ(parse_byte_size("3TiB"), 3ull << 40);
  EXPECT_EQ(parse_byte_size("100B"), 100u);
  for (const char* bad : {"", "GB", "abc", "5XB", "0", "0.0001B", "-1GB", "1.5.2GB", "20000000000TB", "1e3MB"})
    expect_input_error([&] { parse_byte_size(bad); }, {fmt::format("'{}'", bad)});
}

TEST(ByteSize, ShardFileNames) {
  EXPECT_EQ(hf_shard_file_name(2, 5), "model-00002-of-00005.safetensors");
  EXPECT_EQ(hf_shard_file_name(1, 123456), "model-00001-of-123456.safetensors");
}

TEST_F(HfCheckpoint, SingleFileWhenEverythingFits) {
  const Named tensors = four_tensors();
  save(dir_.string(), parse_byte_size("5GB"), tensors);
  EXPECT_EQ(files(), (std::vector<std::string>{"model.safetensors"}));
  EXPECT_EQ(SafetensorsReader(path("model.safetensors")).metadata().at("format"), "pt");
  HfCheckpointReader reader(dir_.string());
  EXPECT_FALSE(reader.sharded());
  EXPECT_EQ(reader.names(), (std::vector<std::string>{"lm_head.weight", "model.embed_tokens.weight",
                                                      "model.layers.0.w", "model.layers.1.w"}));
  EXPECT_EQ(reader.total_bytes(), 160u);
  for (const auto& [name, t] : tensors) EXPECT_TRUE(same_bytes(reader.read(name), t)) << name;
  EXPECT_EQ(reader.entry("model.layers.0.w").shape, (Shape{5, 2}));
  EXPECT_EQ(reader.file_of("lm_head.weight"), path("model.safetensors"));
  EXPECT_FALSE(reader.contains("model.norm.weight"));
  expect_input_error([&] { reader.read("model.norm.weight"); }, {dir_.string(), "'model.norm.weight'"});
}

TEST_F(HfCheckpoint, ShardedWithSortedIndexAndTotalSize) {
  const Named tensors = four_tensors();
  HfCheckpointWriter writer(dir_.string(), 100);
  for (const auto& [name, t] : tensors) writer.declare(name, t.dtype(), t.shape());
  EXPECT_EQ(writer.shard_files(), (std::vector<std::string>{"model-00001-of-00002.safetensors",
                                                            "model-00002-of-00002.safetensors"}));
  EXPECT_EQ(writer.file_of("model.layers.0.w"), "model-00002-of-00002.safetensors");
  for (const auto& [name, t] : tensors) writer.write(name, t);
  writer.finish();

  EXPECT_EQ(files(), (std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                               "model.safetensors.index.json"}));
  std::ifstream index_file(path("model.safetensors.index.json"));
  const std::string index_text(std::istreambuf_iterator<char>(index_file), {});
  EXPECT_EQ(index_text,
            "{\n"
            "  \"metadata\": {\n"
            "    \"total_parameters\": 50,\n"
            "    \"total_size\": 160\n"
            "  },\n"
            "  \"weight_map\": {\n"
            "    \"lm_head.weight\": \"model-00002-of-00002.safetensors\",\n"
            "    \"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\",\n"
            "    \"model.layers.0.w\": \"model-00002-of-00002.safetensors\",\n"
            "    \"model.layers.1.w\": \"model-00001-of-00002.safetensors\"\n"
            "  }\n"
            "}\n");
  EXPECT_EQ(SafetensorsReader(path("model-00002-of-00002.safetensors")).metadata().at("format"), "pt");

  HfCheckpointReader reader(dir_.string());
  EXPECT_TRUE(reader.sharded());
  EXPECT_EQ(reader.names().size(), 4u);
  EXPECT_EQ(reader.total_bytes(), 160u);
  for (const auto& [name, t] : tensors) EXPECT_TRUE(same_bytes(reader.read(name), t)) << name;
  EXPECT_EQ(reader.file_of("model.layers.1.w"), path("model-00001-of-00002.safetensors"));
  EXPECT_TRUE(same_bytes(reader.read_rows("model.layers.0.w", 1, 3), tensors[2].second.slice(1, 3).clone()));
}

TEST_F(HfCheckpoint, TensorLargerThanLimitGetsItsOwnShard) {
  const Named middle = {{"a", patterned({10}, DType::F32, 1)},
                        {"big", patterned({50}, DType::F32, 2)},
                        {"c", patterned({10}, DType::F32, 3)}};
  save(dir_.string(), 100, middle);
  HfCheckpointReader reader(dir_.string());
  EXPECT_EQ(reader.file_of("a"), path(hf_shard_file_name(1, 3)));
  EXPECT_EQ(reader.file_of("big"), path(hf_shard_file_name(2, 3)));
  EXPECT_EQ(reader.file_of("c"), path(hf_shard_file_name(3, 3)));
  for (const auto& [name, t] : middle) EXPECT_TRUE(same_bytes(reader.read(name), t)) << name;

  HfCheckpointWriter first(path("first"), 100);
  first.declare("big", DType::F32, {50});
  first.declare("b", DType::F32, {10});
  first.declare("c", DType::F32, {10});
  EXPECT_EQ(first.shard_files().size(), 2u);
  EXPECT_EQ(first.file_of("b"), first.file_of("c"));
}

TEST_F(HfCheckpoint, StreamsRowsAcrossShards) {
  const Tensor a = patterned({8, 4}, DType::F32, 1);
  const Tensor b = patterned({6, 4}, DType::F32, 2);
  {
    HfCheckpointWriter writer(dir_.string(), 128);
    writer.declare("a", DType::F32, {8, 4});
    writer.declare("b", DType::F32, {6, 4});
    for (int64_t r = 0; r < 8; r += 3) writer.write_rows("a", a.slice(r, std::min<int64_t>(r + 3, 8)));
    writer.write_rows("b", b.slice(0, 6));
    writer.finish();
  }
  HfCheckpointReader reader(dir_.string());
  EXPECT_TRUE(reader.sharded());
  EXPECT_TRUE(same_bytes(reader.read("a"), a));
  EXPECT_TRUE(same_bytes(reader.read("b"), b));
}

TEST_F(HfCheckpoint, UnfinishedOrMisorderedWritesAreInternalErrors) {
  HfCheckpointWriter writer(dir_.string(), 100);
  writer.declare("a", DType::F32, {10});
  writer.declare("b", DType::F32, {20});
  EXPECT_THROW(writer.write("b", Tensor::zeros({20}, DType::F32)), Error);
  writer.write("a", Tensor::zeros({10}, DType::F32));
  EXPECT_THROW(writer.declare("c", DType::F32, {1}), Error);
  EXPECT_THROW(writer.finish(), Error);
}

TEST_F(HfCheckpoint, SavingAgainRemovesStaleWeightFiles) {
  const Named tensors = four_tensors();
  std::ofstream(path("config.json")) << "{}";
  save(dir_.string(), 100, tensors);
  save(dir_.string(), 1000, tensors);  // now one file: the old shards and index must go
  EXPECT_EQ(files(), (std::vector<std::string>{"config.json", "model.safetensors"}));
  save(dir_.string(), 50, tensors);  // sharded again: a leftover model.safetensors would shadow the index
  EXPECT_EQ(files().size(), 6u);
  EXPECT_FALSE(fs::exists(path("model.safetensors")));
  HfCheckpointReader reader(dir_.string());
  EXPECT_TRUE(reader.sharded());
  for (const auto& [name, t] : tensors) EXPECT_TRUE(same_bytes(reader.read(name), t)) << name;
}

TEST_F(HfCheckpoint, AReaderOpensASingleFileToo) {
  write_safetensors(path("w.safetensors"), {{"x", patterned({3}, DType::I64, 1)}});
  HfCheckpointReader reader(path("w.safetensors"));
  EXPECT_EQ(reader.names(), (std::vector<std::string>{"x"}));
}

TEST_F(HfCheckpoint, InvalidDirectoriesAndIndexes) {
  expect_input_error([&] { HfCheckpointReader r(path("absent")); }, {path("absent"), "does not exist"});
  expect_input_error([&] { HfCheckpointReader r(dir_.string()); }, {dir_.string(), "model.safetensors.index.json"});

  save(dir_.string(), 100, four_tensors());
  const std::string index_path = path("model.safetensors.index.json");
  const nlohmann::json good = read_json_file(index_path);
  const auto with_index = [&](const nlohmann::json& index) {
    std::ofstream(index_path) << index.dump(2);
    return dir_.string();
  };

  nlohmann::json missing_file = good;
  missing_file["weight_map"]["model.layers.1.w"] = "model-00009-of-00009.safetensors";
  expect_input_error([&] { HfCheckpointReader r(with_index(missing_file)); },
                     {index_path, "'model.layers.1.w'", "'model-00009-of-00009.safetensors', which does not exist"});

  nlohmann::json wrong_file = good;
  wrong_file["weight_map"]["model.layers.1.w"] = "model-00002-of-00002.safetensors";
  expect_input_error([&] { HfCheckpointReader r(with_index(wrong_file)); },
                     {index_path, "'model.layers.1.w'", "holds no such tensor"});

  nlohmann::json wrong_total = good;
  wrong_total["metadata"]["total_size"] = 161;
  expect_input_error([&] { HfCheckpointReader r(with_index(wrong_total)); },
                     {index_path, "total_size is 161", "hold 160 bytes"});

  nlohmann::json float_total = good;
  float_total["metadata"]["total_size"] = 160.0;  // some writers store a float: still the right size
  EXPECT_EQ(HfCheckpointReader(with_index(float_total)).total_bytes(), 160u);

  nlohmann::json no_total = good;
  no_total["metadata"] = nlohmann::json::object();
  EXPECT_EQ(HfCheckpointReader(with_index(no_total)).names().size(), 4u);

  nlohmann::json escaping = good;
  escaping["weight_map"]["lm_head.weight"] = "../model-00002-of-00002.safetensors";
  expect_input_error([&] { HfCheckpointReader r(with_index(escaping)); }, {index_path, "not a file name inside"});

  expect_input_error([&] { HfCheckpointReader r(with_index(nlohmann::json{{"metadata", good["metadata"]}})); },
                     {index_path, "weight_map"});

  std::ofstream(index_path) << "{\"weight_map\": {\"a\": }";
  expect_input_error([&] { HfCheckpointReader r(dir_.string()); }, {index_path + ":1:22: invalid JSON"});

  with_index(good);
  fs::resize_file(path("model-00001-of-00002.safetensors"), 30);
  expect_input_error([&] { HfCheckpointReader r(dir_.string()); }, {path("model-00001-of-00002.safetensors")});
}
