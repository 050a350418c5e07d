// Unit tests of the HuggingFace conversions: HF -> veomni-ckpt-shard -> veomni-ckpt-merge round trips of the
// transformers fixtures (byte-identical in fp32, any layout), bf16 / stacked / sharded output, tokenizer copies and
// every bad input (nothing left under the output name).
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "ckpt/checkpoint_reader.h"
#include "ckpt/merge_to_hf.h"
#include "ckpt/shard_from_hf.h"
#include "io/hf_checkpoint.h"
#include "io/json_file.h"
#include "test_ckpt_util.h"

using namespace veomni;
using namespace veomni::test;

namespace {

const std::string kFixtures = VEOMNI_FIXTURES_DIR;

std::string fixture_model(const std::string& name) { return kFixtures + "/hf/" + name + "/model"; }

// Every tensor of `a` is in `b` with identical dtype, shape and bytes, and the name sets are equal.
void expect_same_tensors(const std::string& a, const std::string& b) {
  const HfCheckpointReader ra(a), rb(b);
  EXPECT_EQ(ra.names(), rb.names()) << a << " vs " << b;
  for (const std::string& name : ra.names())
    if (rb.contains(name)) {
      EXPECT_TRUE(same_bytes(ra.read(name), rb.read(name))) << name;
    }
}

class CkptConvert : public ScratchDir {};

TEST_F(CkptConvert, HfShardMergeRoundTripIsByteIdenticalUnderEveryLayout) {
  struct Case {
    std::string model;
    MeshShape mesh;
  };
  for (const Case& c : {Case{"qwen3_toy", {1, 1, 1}}, Case{"qwen3_toy", {3, 1, 1}}, Case{"qwen3_toy_tied", {4, 2, 1}},
                        Case{"qwen3_moe_toy", {4, 2, 2}}, Case{"qwen3_moe_toy", {8, 1, 8}}}) {
    SCOPED_TRACE(c.model + " " + c.mesh.describe());
    const std::string tag = fmt::format("{}_{}_{}_{}", c.model, c.mesh.world, c.mesh.ulysses, c.mesh.ep);
    ShardFromHfOptions options;
    options.mesh = c.mesh;
    const ShardFromHfSummary sharded = shard_hf_checkpoint(fixture_model(c.model), path(tag + "_ck"), options);
    EXPECT_EQ(CheckpointReader(path(tag + "_ck")).metadata().rank_files.size(), static_cast<size_t>(c.mesh.world));
    const MergeSummary merged = merge_checkpoint_to_hf(path(tag + "_ck"), path(tag + "_hf"), MergeOptions{});
    EXPECT_EQ(merged.global_step, 0);
    EXPECT_EQ(merged.weight_files, std::vector<std::string>{"model.safetensors"});
    expect_same_tensors(fixture_model(c.model), path(tag + "_hf"));
    const nlohmann::json config = read_json_file(path(tag + "_hf/config.json"));
    EXPECT_EQ(config["dtype"], "float32");
    EXPECT_EQ(config["model_type"], read_json_file(fixture_model(c.model) + "/config.json")["model_type"]);
  }
  // The tied model has no lm_head.weight, like the transformers file.
  EXPECT_FALSE(HfCheckpointReader(path("qwen3_toy_tied_4_2_1_hf")).contains("lm_head.weight"));
  // Different layouts merge to the same bytes, file for file.
  EXPECT_EQ(read_bytes(path("qwen3_moe_toy_4_2_2_hf/model.safetensors")),
            read_bytes(path("qwen3_moe_toy_8_1_8_hf/model.safetensors")));
  EXPECT_EQ(read_bytes(path("qwen3_toy_1_1_1_hf/model.safetensors")),
            read_bytes(path("qwen3_toy_3_1_1_hf/model.safetensors")));
}

TEST_F(CkptConvert, MergeWritesBf16StackedExpertsAndValidShardsWithIndex) {
  ShardFromHfOptions options;
  options.mesh = {2, 1, 2};
  shard_hf_checkpoint(fixture_model("qwen3_moe_toy"), path("ck"), options);
  MergeOptions merge;
  merge.dtype = DType::BF16;
  merge.experts = ExpertNaming::Stacked;
  merge.max_shard_bytes = 200'000;
  const MergeSummary s = merge_checkpoint_to_hf(path("ck"), path("hf"), merge);
  ASSERT_GT(s.weight_files.size(), 1u);
  EXPECT_TRUE(fs::exists(path("hf/model.safetensors.index.json")));
  EXPECT_FALSE(fs::exists(path("hf/model.safetensors")));
  const HfCheckpointReader merged(path("hf"));  // validates offsets, sizes and the index's total_size
  const HfCheckpointReader original(fixture_model("qwen3_moe_toy"));
  EXPECT_EQ(merged.total_bytes(), s.tensor_bytes);
  EXPECT_EQ(original.total_bytes(), 2 * merged.total_bytes());  // f32 -> bf16
  EXPECT_EQ(read_json_file(path("hf/model.safetensors.index.json"))["metadata"]["total_size"], merged.total_bytes());
  EXPECT_EQ(read_json_file(path("hf/config.json"))["dtype"], "bfloat16");
  EXPECT_FALSE(merged.contains("model.layers.0.mlp.experts.0.up_proj.weight"));
  // Stacked gate_up [E, 2I, H]: expert 1's up rows are the per-expert up_proj, rounded to bf16.
  const Tensor gate_up = merged.read("model.layers.1.mlp.experts.gate_up_proj");
  const Tensor up1 = original.read("model.layers.1.mlp.experts.1.up_proj.weight");
  ASSERT_EQ(gate_up.dtype(), DType::BF16);
  const int64_t i = up1.dim(0);
  ASSERT_EQ(gate_up.dim(1), 2 * i);
  const Tensor merged_up1 = gate_up.select(1).slice(i, 2 * i).to_dtype(DType::F32);
  EXPECT_EQ(merged_up1.to_float_vector(), up1.to_dtype(DType::BF16).to_dtype(DType::F32).to_float_vector());
  EXPECT_TRUE(same_bytes(merged.read("model.norm.weight"), original.read("model.norm.weight").to_dtype(DType::BF16)));
}

TEST_F(CkptConvert, MergeCopiesTheRunsTokenizerFiles) {
  ShardFromHfOptions options;
  options.mesh = {1, 1, 1};
  shard_hf_checkpoint(fixture_model("qwen3_toy"), path("ck"), options);
  fs::create_directories(path("tok"));
  write_bytes(path("tok/tokenizer.json"), "{\"model\": {}}");
  write_bytes(path("tok/tokenizer_config.json"), "{}");
  write_bytes(path("tok/unrelated.bin"), "x");
  nlohmann::json metadata = read_json_file(path("ck/metadata.json"));
  metadata["tokenizer_path"] = path("tok");
  write_json_file(path("ck/metadata.json"), metadata);

  const MergeSummary s = merge_checkpoint_to_hf(path("ck"), path("hf"), MergeOptions{});
  EXPECT_EQ(s.tokenizer_files, (std::vector<std::string>{"tokenizer.json", "tokenizer_config.json"}));
  EXPECT_EQ(read_bytes(path("hf/tokenizer.json")), "{\"model\": {}}");
  EXPECT_FALSE(fs::exists(path("hf/unrelated.bin")));
  MergeOptions skip;
  skip.copy_tokenizer = false;
  EXPECT_TRUE(merge_checkpoint_to_hf(path("ck"), path("hf2"), skip).tokenizer_files.empty());

  metadata["tokenizer_path"] = path("gone");
  write_json_file(path("ck/metadata.json"), metadata);
  expect_input_error([&] { merge_checkpoint_to_hf(path("ck"), path("hf3"), MergeOptions{}); },
                     {"gone", "does not exist", "--no-tokenizer"});
  EXPECT_FALSE(fs::exists(path("hf3")));
}

TEST_F(CkptConvert, BadCheckpointsFailNamingTheFileAndLeaveNoOutput) {
  ShardFromHfOptions options;
  options.mesh = {2, 1, 1};
  shard_hf_checkpoint(fixture_model("qwen3_toy"), path("ck"), options);
  const std::string rank1 = path("ck/rank-00001-of-00002.h5");
  const std::string good = read_bytes(rank1);
  const std::string good_metadata = read_bytes(path("ck/metadata.json"));
  auto merge_fails = [&](std::initializer_list<std::string> fragments) {
    expect_input_error([&] { merge_checkpoint_to_hf(path("ck"), path("hf"), MergeOptions{}); }, fragments);
    EXPECT_FALSE(fs::exists(path("hf")));
    for (const auto& e : fs::directory_iterator(dir_))
      EXPECT_EQ(e.path().filename().string().find("hf"), std::string::npos) << e.path();
  };
  fs::remove(rank1);
  merge_fails({rank1, "missing"});
  write_bytes(rank1, good.substr(0, good.size() - 100));
  merge_fails({rank1, "truncated"});
  const HfCheckpointReader original(fixture_model("qwen3_toy"));
  const Tensor embed = original.read("model.embed_tokens.weight");
  write_bytes(rank1, good);
  ASSERT_TRUE(corrupt_tensor_bytes(rank1, embed.view({embed.numel()}).slice(embed.numel() / 2, embed.numel())));
  merge_fails({rank1});
  write_bytes(rank1, good);
  write_bytes(path("ck/metadata.json"), "not json");
  merge_fails({"metadata.json", "invalid JSON"});
  merge_fails({"metadata.json"});
  expect_input_error([&] { merge_checkpoint_to_hf(path("nowhere"), path("hf"), MergeOptions{}); }, {"nowhere"});
  write_bytes(path("ck/metadata.json"), good_metadata);
  MergeOptions over;
  over.overwrite = true;
  expect_input_error([&] { merge_checkpoint_to_hf(path("ck"), path("ck/"), over); }, {"is the checkpoint being read"});
  EXPECT_TRUE(fs::exists(path("ck/metadata.json")));
}

TEST_F(CkptConvert, ShardRejectsLayoutsTheModelCannotTakeAndExistingOutput) {
  ShardFromHfOptions options;
  options.mesh = {3, 1, 3};  // 8 experts over ep 3
  expect_input_error([&] { shard_hf_checkpoint(fixture_model("qwen3_moe_toy"), path("ck"), options); }, {"ep_size"});
  options.mesh = {3, 3, 1};  // 4 heads over ulysses 3
  expect_input_error([&] { shard_hf_checkpoint(fixture_model("qwen3_toy"), path("ck"), options); }, {"ulysses_size"});
  options.mesh = {4, 3, 1};
  expect_input_error([&] { shard_hf_checkpoint(fixture_model("qwen3_toy"), path("ck"), options); },
                     {"--ulysses 3", "--world 4"});
  options.mesh = {2, 1, 2};  // a dense model has no experts to split
  expect_input_error([&] { shard_hf_checkpoint(fixture_model("qwen3_toy"), path("ck"), options); }, {"ep_size"});
  EXPECT_FALSE(fs::exists(path("ck")));
  options.mesh = {1, 1, 1};
  expect_input_error([&] { shard_hf_checkpoint(path("missing"), path("ck"), options); }, {"missing"});
  fs::create_directories(path("ck"));
  write_bytes(path("ck/keep.txt"), "mine");
  expect_input_error([&] { shard_hf_checkpoint(fixture_model("qwen3_toy"), path("ck"), options); },
                     {"ck", "not empty", "--overwrite"});
  EXPECT_EQ(read_bytes(path("ck/keep.txt")), "mine");
}

}  // namespace
