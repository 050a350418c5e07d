// Unit tests of hostile inputs: oversized and overflowing sizes, NUL bytes, number overflows, non-regular and huge
// files, ambiguous YAML, outputs over inputs: each is an InputError naming the file and key, line or sample.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/collator.h"
#include "data/dataset_reader.h"
#include "data/dataset_writer.h"
#include "data/dummy_data.h"
#include "io/json_file.h"
#include "io/output_paths.h"
#include "io/safetensors.h"
#include "io/yaml_config.h"
#include "model/model_config.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/expect_error.h"

using namespace veomni;

namespace {

using InputHardening = veomni::testing::ScratchDir;

// Runs f, expects an InputError whose message contains every fragment.
using veomni::testing::expect_input_error;

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// --- JSON ---------------------------------------------------------------------------------------------------

TEST(InputHardeningJson, NumberOverflowNamesTheSourceAndLine) {
  expect_input_error([] { parse_json("{\"a\": 1,\n \"b\": 1e999}", "config.json"); },
                     {"config.json:2:7: invalid JSON: number overflow", "1e999"});
  expect_input_error([] { parse_ordered_json("[1e999]", "metadata.json"); }, {"metadata.json:1:2: invalid JSON"});
}

TEST(InputHardeningJson, NulByteIsAnErrorWithItsPosition) {
  const std::string text("{\"text\": \"ok\"}\0{\"text\": \"hidden\"}", 33);
  expect_input_error([&] { parse_json(text, "data.json"); }, {"data.json:1:15: a NUL byte is not allowed"});
  expect_input_error([&] { parse_json_line(text); }, {"NUL byte at column 15"});
}

TEST(InputHardeningJson, LineErrorsGiveTheColumn) {
  expect_input_error([] { parse_json_line("{\"text\": 1e999}"); }, {"invalid JSON at column 10", "number overflow"});
  expect_input_error([] { parse_json_line("{\"text\": }"); }, {"invalid JSON at column 10"});
}

TEST(InputHardeningJson, LongInputIsCutInMessages) {
  const std::string huge = "{\"x\": \"" + std::string(100000, 'a') + "\" oops}";
  try {
    parse_json(huge, "big.json");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_LT(std::string(e.what()).size(), 600u) << e.what();
  }
  EXPECT_EQ(quoted_excerpt("short"), "short");
  EXPECT_EQ(quoted_excerpt(std::string(300, 'b'), 10), "bbbbbbbbbb… (300 bytes in all)");
}

TEST_F(InputHardening, TextFilesMustBeRegularAndBounded) {
  expect_input_error([] { read_text_file("/dev/zero"); }, {"/dev/zero", "not a regular file"});
  write_file(path("big.yaml"), std::string(100, 'x'));
  expect_input_error([&] { read_text_file(path("big.yaml"), 10); }, {"big.yaml", "holds 100 bytes", "10 bytes"});
  EXPECT_EQ(read_text_file(path("big.yaml"), 100).size(), 100u);
}

// --- YAML ---------------------------------------------------------------------------------------------------

const std::vector<ConfigFieldSpec>& yaml_fields() {
  static const std::vector<ConfigFieldSpec> fields = {
      {"train.steps", ConfigType::Int, "", {}}, {"train.lr", ConfigType::Double, "", {}}};
  return fields;
}

ConfigValue only_value(const std::string& yaml) {
  const auto assignments = parse_yaml_assignments(yaml, "cfg.yaml", yaml_fields());
  EXPECT_EQ(assignments.size(), 1u);
  return assignments.at(0).value;
}

TEST(InputHardeningYaml, SecondDocumentIsRefused) {
  expect_input_error([] { parse_yaml_assignments("train:\n  steps: 1\n---\ntrain:\n  steps: 2\n", "cfg.yaml", yaml_fields()); },
                     {"cfg.yaml line", "second YAML document"});
  EXPECT_EQ(std::get<int64_t>(only_value("---\ntrain:\n  steps: 3\n")), 3);
}

TEST(InputHardeningYaml, NumbersFollowYaml11OrAreRefused) {
  expect_input_error([] { only_value("train:\n  steps: 010\n"); }, {"cfg.yaml line 2", "'train.steps'", "octal"});
  expect_input_error([] { only_value("train:\n  lr: 010\n"); }, {"octal"});
  expect_input_error([] { only_value("train:\n  steps: 0o10\n"); }, {"'train.steps'", "string"});
  EXPECT_EQ(std::get<int64_t>(only_value("train:\n  steps: 0x1F\n")), 31);
  EXPECT_EQ(std::get<int64_t>(only_value("train:\n  steps: 1_000\n")), 1000);
  EXPECT_EQ(std::get<int64_t>(only_value("train:\n  steps: 0\n")), 0);
  EXPECT_EQ(std::get<int64_t>(only_value("train:\n  steps: -7\n")), -7);
  EXPECT_DOUBLE_EQ(std::get<double>(only_value("train:\n  lr: 1e-4\n")), 1e-4);
  EXPECT_DOUBLE_EQ(std::get<double>(only_value("train:\n  lr: 1.0e-4\n")), 1e-4);
  EXPECT_DOUBLE_EQ(std::get<double>(only_value("train:\n  lr: 0.5\n")), 0.5);
}

TEST(InputHardeningYaml, NulByteAndDeepNestingGiveRealMessages) {
  expect_input_error([] { parse_yaml_assignments(std::string("train:\n  steps: \"a\0i\"\n", 22), "cfg.yaml", yaml_fields()); },
                     {"cfg.yaml:2:12: a NUL byte is not allowed"});
  const std::string deep = "train: " + std::string(3000, '[') + std::string(3000, ']') + "\n";
  expect_input_error([&] { parse_yaml_assignments(deep, "cfg.yaml", yaml_fields()); },
                     {"cfg.yaml line 1", "nested more than"});
}

// --- model config -------------------------------------------------------------------------------------------

nlohmann::json hardening_toy_config() {
  return {{"model_type", "qwen3"},      {"vocab_size", 1024},        {"hidden_size", 64},
          {"intermediate_size", 128},   {"num_hidden_layers", 2},    {"num_attention_heads", 4},
          {"num_key_value_heads", 2},   {"head_dim", 16}};
}

TEST(InputHardeningModelConfig, HugeSizesAreRefusedByKey) {
  EXPECT_NO_THROW(model_config_from_json(hardening_toy_config(), "config.json"));
  for (const char* key : {"vocab_size", "intermediate_size", "num_hidden_layers", "hidden_size", "head_dim"}) {
    nlohmann::json c = hardening_toy_config();
    c[key] = int64_t{1} << 58;
    expect_input_error([&] { model_config_from_json(c, "m/config.json"); },
                       {"m/config.json: key '", std::string(key) + "'", "the largest this toolkit accepts"});
  }
  nlohmann::json layers = hardening_toy_config();
  layers["num_hidden_layers"] = 100000;
  expect_input_error([&] { model_config_from_json(layers, "config.json"); }, {"key 'num_hidden_layers'"});
}

TEST(InputHardeningModelConfig, TotalParameterCountIsBounded) {
  nlohmann::json c = hardening_toy_config();  // each size within its bound, the product far beyond any machine
  c["vocab_size"] = int64_t{1} << 24;
  c["hidden_size"] = int64_t{1} << 17;
  c["intermediate_size"] = int64_t{1} << 20;
  c["num_hidden_layers"] = 1024;
  expect_input_error([&] { model_config_from_json(c, "config.json"); },
                     {"config.json: the sizes describe a model of", "parameters", "vocab_size 16777216"});
  nlohmann::json moe = hardening_toy_config();
  moe["model_type"] = "qwen3_moe";
  moe["num_experts"] = 16384;
  moe["moe_intermediate_size"] = int64_t{1} << 20;
  moe["hidden_size"] = int64_t{1} << 17;
  moe["num_hidden_layers"] = 1024;
  moe["num_experts_per_tok"] = 2;
  expect_input_error([&] { model_config_from_json(moe, "config.json"); }, {"num_local_experts 16384", "parameters"});
}

// --- dummy data ---------------------------------------------------------------------------------------------

TEST(InputHardeningDummyData, HugeSeqLenIsRefused) {
  expect_input_error([] { dummy_layout(DummyType::Text, int64_t{2305843009213693952}); }, {"--seq-len must be at most"});
  expect_input_error([] { dummy_layout(DummyType::Qwen3Omni, int64_t{1} << 62); }, {"--seq-len must be at most"});
}

// --- collators: errors name the sample ----------------------------------------------------------------------

TokenSample token_sample(std::vector<int64_t> ids, std::string context) {
  TokenSample s;
  s.input_ids = Tensor::from_vector(ids, {static_cast<int64_t>(ids.size())});
  s.context = std::move(context);
  return s;
}

TEST(InputHardeningCollator, ErrorsNameTheSample) {
  CollateOptions options;
  options.vocab_size = 1000;
  std::vector<TokenSample> samples = {token_sample({1, 2, 3}, "a.h5 sample 0"),
                                      token_sample({1, 2, 3, 5000}, "a.h5 sample 7")};
  expect_input_error([&] { pack_samples(samples, options); },
                     {"a.h5 sample 7: input_ids[3] = 5000 is outside the model vocabulary [0, 1000)"});
  samples[1] = token_sample({1, 2, 3, 4}, "a.h5 sample 7");
  samples[1].labels = Tensor::from_vector(std::vector<int64_t>{1, 2, 3}, {3});
  expect_input_error([&] { pack_samples(samples, options); }, {"a.h5 sample 7: labels i64[3]", "do not match input_ids"});
  samples[1].labels = Tensor::from_vector(std::vector<int64_t>{-100, 2, 3, 1000}, {4});
  expect_input_error([&] { pack_samples(samples, options); }, {"a.h5 sample 7: labels[3] = 1000 is outside"});
  samples[1].labels = Tensor();
  samples[1].input_ids = Tensor::from_vector(std::vector<int32_t>{1, 2}, {2});
  expect_input_error([&] { pack_samples(samples, options); }, {"a.h5 sample 7: input_ids must be i64 [L], got i32"});
}

// --- datasets: checked when opened, errors name the file and sample ----------------------------------------

Sample hardening_text_sample(int64_t length, int64_t label_length) {
  std::vector<int64_t> ids(static_cast<size_t>(length), 1), labels(static_cast<size_t>(label_length), 1);
  return {{"input_ids", Tensor::from_vector(ids, {length})}, {"labels", Tensor::from_vector(labels, {label_length})}};
}

TEST_F(InputHardening, DatasetLabelsMustMatchInputIds) {
  const std::string file = path("bad.h5");
  DatasetWriter writer(file, DatasetInfo{});
  writer.append(hardening_text_sample(4, 4));
  writer.append(hardening_text_sample(64, 62));
  writer.close();
  expect_input_error([&] { DatasetReader reader(file); }, {"bad.h5 sample 1: labels has 62 entries but input_ids 64"});
}

TEST_F(InputHardening, DatasetInputIdsMustBeI64) {
  const std::string file = path("i32.h5");
  DatasetWriter writer(file, DatasetInfo{});
  writer.append({{"input_ids", Tensor::from_vector(std::vector<int32_t>{1, 2, 3}, {3})}});
  writer.close();
  expect_input_error([&] { DatasetReader reader(file); }, {"i32.h5: key 'input_ids' is i32", "expected i64[L]"});
}

// --- safetensors: sizes beyond int64 ------------------------------------------------------------------------

TEST_F(InputHardening, SafetensorsShapeBeyondInt64IsRefused) {
  const std::string header = R"({"t": {"dtype": "U8", "shape": [0, 18446744073709551615], "data_offsets": [0, 0]}})";
  const uint64_t length = header.size();
  std::string bytes(reinterpret_cast<const char*>(&length), 8);
  write_file(path("m.safetensors"), bytes + header);
  expect_input_error([&] { SafetensorsReader reader(path("m.safetensors")); },
                     {"m.safetensors: tensor 't'", "beyond 2^63"});
}

// --- outputs ------------------------------------------------------------------------------------------------

TEST_F(InputHardening, OutputMustNotBeAnInputNorExistWithoutOverwrite) {
  write_file(path("in.jsonl"), "{}\n");
  expect_input_error([&] { check_outputs({path("in.jsonl")}, {path("in.jsonl")}, true, "--out"); },
                     {"--out", "is the input", "destroy"});
  std::filesystem::create_hard_link(path("in.jsonl"), path("link.h5"));
  expect_input_error([&] { check_outputs({path("link.h5")}, {path("in.jsonl")}, true, "--out"); }, {"is the input"});
  expect_input_error([&] { check_outputs({path("link.h5")}, {"-"}, false, "--out"); }, {"exists", "--overwrite"});
  EXPECT_NO_THROW(check_outputs({path("link.h5")}, {"-"}, true, "--out"));
  EXPECT_NO_THROW(check_outputs({path("new.h5")}, {path("in.jsonl")}, false, "--out"));
}

}  // namespace
