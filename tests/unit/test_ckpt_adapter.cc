// Unit tests of adapter (LoRA) checkpoints: metadata version 3 with the LoRA settings and the base's identity, the
// older versions still read, restore under other layouts, read_adapter_checkpoint, the refusal of uses that need a
// whole model, and the base identity's checksums and their mismatch errors.
#include <gtest/gtest.h>

#include "ckpt/adapter_checkpoint.h"
#include "ckpt/base_model_identity.h"
#include "ckpt/checkpoint_consistency.h"
#include "ckpt/checkpoint_restore.h"
#include "ckpt/checkpoint_save.h"
#include "ckpt/file_checksum.h"
#include "ckpt/merge_to_hf.h"
#include "io/json_file.h"
#include "test_ckpt_util.h"
#include "test_model_util.h"

using namespace veomni;
using namespace veomni::test;

namespace {

// A dense toy's adapters on q_proj and v_proj of both layers: A [r, in], B [out, r], r = 4.
struct AdapterParam {
  std::string name;
  Shape shape;
};

std::vector<AdapterParam> adapter_params(const ModelConfig& c) {
  const int64_t r = 4, q_out = c.num_attention_heads * c.head_dim, kv_out = c.num_key_value_heads * c.head_dim;
  std::vector<AdapterParam> out;
  for (int l = 0; l < 2; ++l) {
    const std::string attn = fmt::format("model.layers.{}.self_attn.", l);
    out.push_back({attn + "q_proj.lora_A.weight", {r, c.hidden_size}});
    out.push_back({attn + "q_proj.lora_B.weight", {q_out, r}});
    out.push_back({attn + "v_proj.lora_A.weight", {r, c.hidden_size}});
    out.push_back({attn + "v_proj.lora_B.weight", {kv_out, r}});
  }
  return out;
}

class AdapterCheckpointTest : public ScratchDir {
 protected:
  ModelConfig config = tiny_dense_config(false);
  std::vector<AdapterParam> params = adapter_params(config);
  LocalCommunicator world;

  AdapterCheckpointInfo adapter_info() {
    AdapterCheckpointInfo info;
    info.lora.rank = 4;
    info.lora.alpha = 16;
    info.lora.lora_modules = {"q_proj", "v_proj"};
    info.base.model_path = "/models/base";
    info.base.weight_files = {{"model-00001-of-00002.safetensors", 0x1234}, {"model-00002-of-00002.safetensors", 7}};
    return info;
  }
  // Full tensors per field, seeded by parameter and field.
  Tensor full(size_t i, ShardField f) const {
    return random_tensor(params[i].shape, 100 * i + static_cast<uint64_t>(f) + 1);
  }
  std::vector<ParamShardState> shards_for(const MeshShape& m, int64_t rank) const {
    std::vector<ParamShardState> out;
    for (size_t i = 0; i < params.size(); ++i) {
      ParamShardState s{params[i].name, params[i].shape, false, {}, {}, {}};
      for (ShardField f : kShardFields) s.field(f) = shard_of(full(i, f), params[i].shape, false, m, rank);
      out.push_back(std::move(s));
    }
    return out;
  }
  std::string save(const std::optional<AdapterCheckpointInfo>& adapter) {
    MetricsLog log;
    log.append({{"loss", 1.0}});
    CheckpointSaveRequest r;
    r.output_dir = path("run");
    r.mesh = MeshShape{1, 1, 1};
    r.position.global_step = 1;
    r.position.optimizer_steps = 1;
    r.model_config = config;
    r.producer = "test";
    r.metrics = &log;
    r.adapter = adapter;
    return save_checkpoint(world, r, shards_for(r.mesh, 0));
  }
};

TEST_F(AdapterCheckpointTest, MetadataVersion3RecordsLoraAndBaseAndRestoresUnderAnyLayout) {
  const std::string dir = save(adapter_info());
  const nlohmann::json j = read_json_file(dir + "/metadata.json");
  EXPECT_EQ(j["format_version"], 3);
  EXPECT_EQ(j["lora"]["rank"], 4);
  EXPECT_EQ(j["lora"]["lora_modules"], nlohmann::json::array({"q_proj", "v_proj"}));
  EXPECT_EQ(j["base_model"]["model_path"], "/models/base");
  EXPECT_EQ(j["base_model"]["weight_files"][0]["checksum"], format_checksum(0x1234));
  EXPECT_TRUE(j["base_model"]["seed"].is_null());
  const CheckpointReader reader(dir);
  ASSERT_TRUE(reader.is_adapter());
  EXPECT_EQ(*reader.metadata().adapter, adapter_info());
  ASSERT_EQ(reader.metadata().params.size(), params.size());
  for (const MeshShape& m : {MeshShape{1, 1, 1}, MeshShape{2, 1, 1}, MeshShape{4, 2, 1}, MeshShape{3, 1, 1}}) {
    for (int64_t r = 0; r < m.world; ++r) {
      std::vector<ParamShardState> restored = shards_for(m, r);
      for (ParamShardState& s : restored)
        for (ShardField f : kShardFields) s.field(f).zero_();
      check_checkpoint_model(reader, config, ModelHead::LanguageModel, restored);
      restore_param_shards(reader, m, r, restored);
      const std::vector<ParamShardState> expected = shards_for(m, r);
      for (size_t i = 0; i < restored.size(); ++i)
        for (ShardField f : kShardFields)
          ASSERT_EQ(restored[i].field(f).to_float_vector(), expected[i].field(f).to_float_vector())
              << m.describe() << " rank " << r << " " << restored[i].name;
    }
  }
}

TEST_F(AdapterCheckpointTest, RandomInitBaseRecordsItsSeed) {
  AdapterCheckpointInfo info = adapter_info();
  info.base = identify_base_model("", -17);
  const std::string dir = save(info);
  const nlohmann::json j = read_json_file(dir + "/metadata.json");
  EXPECT_EQ(j["base_model"]["model_path"], "");
  EXPECT_EQ(j["base_model"]["seed"], -17);
  EXPECT_EQ(read_checkpoint_metadata(dir).adapter->base, info.base);
}

TEST_F(AdapterCheckpointTest, ReadAdapterCheckpointGathersEveryTensorInFull) {
  save(adapter_info());
  const AdapterCheckpoint a = read_adapter_checkpoint(path("run"));  // through `latest`
  EXPECT_EQ(a.global_step, 1);
  EXPECT_EQ(a.lora, adapter_info().lora);
  EXPECT_EQ(a.base, adapter_info().base);
  EXPECT_EQ(a.head, ModelHead::LanguageModel);
  ASSERT_EQ(a.tensors.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(a.tensors[i].first, params[i].name);
    EXPECT_EQ(a.tensors[i].second.shape(), params[i].shape);
    EXPECT_EQ(a.tensors[i].second.to_float_vector(), full(i, ShardField::Master).to_float_vector());
  }
}

TEST_F(AdapterCheckpointTest, UsesThatNeedAWholeModelRefuseAnAdapterCheckpoint) {
  const std::string dir = save(adapter_info());
  const CheckpointReader reader(dir);
  expect_input_error([&] { reader.require_full_model("merging"); },
                     {dir, "adapter checkpoint", "LoRA rank 4", "/models/base", "merging", "hint"});
  expect_input_error([&] { check_params_match_model_config(reader); }, {"adapter checkpoint"});
  MergeOptions options;
  expect_input_error([&] { merge_checkpoint_to_hf(dir, path("hf"), options); },
                     {"adapter checkpoint", "merging to a HuggingFace model"});
  EXPECT_FALSE(fs::exists(path("hf")));
}

TEST_F(AdapterCheckpointTest, WholeModelCheckpointIsNoAdapterCheckpoint) {
  const std::string dir = save(std::nullopt);
  const nlohmann::json j = read_json_file(dir + "/metadata.json");
  EXPECT_EQ(j["format_version"], 1) << "a causal-LM checkpoint keeps the oldest version";
  EXPECT_FALSE(j.contains("lora"));
  const CheckpointReader reader(dir);
  EXPECT_FALSE(reader.is_adapter());
  reader.require_full_model("merging");
  expect_input_error([&] { read_adapter_checkpoint(dir); }, {"metadata.json", "not an adapter", "'lora'"});
}

TEST_F(AdapterCheckpointTest, MetadataValidationOfLoraKeys) {
  const std::string dir = save(adapter_info());
  const std::string file = dir + "/metadata.json";
  const nlohmann::json good = read_json_file(file);
  auto with = [&](auto&& edit) {
    nlohmann::json j = good;
    edit(j);
    write_json_file(file, j);
  };
  with([](nlohmann::json& j) { j["format_version"] = 2; });
  expect_input_error([&] { read_checkpoint_metadata(dir); }, {"metadata.json", "need format_version 3", "says 2"});
  with([](nlohmann::json& j) { j.erase("base_model"); });
  expect_input_error([&] { read_checkpoint_metadata(dir); }, {"metadata.json", "missing key 'base_model'"});
  with([](nlohmann::json& j) { j["lora"]["rank"] = 0; });
  expect_input_error([&] { read_checkpoint_metadata(dir); }, {"metadata.json", "lora.rank"});
  with([](nlohmann::json& j) { j["base_model"]["weight_files"][1]["checksum"] = "crc:1"; });
  expect_input_error([&] { read_checkpoint_metadata(dir); },
                     {"metadata.json", "base_model.weight_files[1].checksum", "crc:1"});
  with([](nlohmann::json& j) { j["base_model"]["weight_files"] = nlohmann::json::array(); });
  expect_input_error([&] { read_checkpoint_metadata(dir); }, {"base_model.weight_files", "empty"});
  with([](nlohmann::json& j) { j["base_model"]["model_path"] = ""; });
  expect_input_error([&] { read_checkpoint_metadata(dir); }, {"base_model.weight_files", "random init"});
}

class BaseIdentity : public ScratchDir {
 protected:
  void SetUp() override {
    ScratchDir::SetUp();
    fs::create_directories(path("base"));
    write_bytes(path("base/model-00001-of-00002.safetensors"), std::string(4096, 'a'));
    write_bytes(path("base/model-00002-of-00002.safetensors"), std::string(100, 'b'));
    write_bytes(path("base/config.json"), "{}");
  }
};

TEST_F(BaseIdentity, ChecksumsEveryWeightFileSortedByName) {
  const BaseModelIdentity base = identify_base_model(path("base"), 3);
  EXPECT_EQ(base.model_path, path("base"));
  ASSERT_EQ(base.weight_files.size(), 2u);
  EXPECT_EQ(base.weight_files[0].file, "model-00001-of-00002.safetensors");
  EXPECT_EQ(base.weight_files[1].checksum, file_checksum(path("base/model-00002-of-00002.safetensors")));
  check_same_base_model(base, identify_base_model(path("base"), 99), "ck");  // the seed does not matter
  const BaseModelIdentity single = identify_base_model(path("base/model-00002-of-00002.safetensors"), 0);
  ASSERT_EQ(single.weight_files.size(), 1u);
  EXPECT_EQ(single.weight_files[0].file, "model-00002-of-00002.safetensors");
  fs::create_directories(path("empty"));
  expect_input_error([&] { identify_base_model(path("empty"), 0); }, {"empty", "no *.safetensors"});
}

TEST_F(BaseIdentity, AChangedMovedOrMissingBaseIsAnInputErrorWithBothChecksums) {
  const BaseModelIdentity saved = identify_base_model(path("base"), 0);
  std::string bytes = read_bytes(path("base/model-00002-of-00002.safetensors"));
  bytes[50] = 'c';
  write_bytes(path("base/model-00002-of-00002.safetensors"), bytes);
  const BaseModelIdentity now = identify_base_model(path("base"), 0);
  expect_input_error([&] { check_same_base_model(saved, now, "ck/global_step_2"); },
                     {"ck/global_step_2", path("base") + "/model-00002-of-00002.safetensors",
                      format_checksum(saved.weight_files[1].checksum), format_checksum(now.weight_files[1].checksum),
                      "hint: set model.model_path"});
  // Copied elsewhere unchanged: the same base.
  fs::create_directories(path("copy"));
  fs::copy_file(path("base/model-00001-of-00002.safetensors"), path("copy/model-00001-of-00002.safetensors"));
  write_bytes(path("copy/model-00002-of-00002.safetensors"), std::string(100, 'b'));
  check_same_base_model(saved, identify_base_model(path("copy"), 0), "ck");
  fs::remove(path("copy/model-00002-of-00002.safetensors"));
  expect_input_error([&] { check_same_base_model(saved, identify_base_model(path("copy"), 0), "ck"); },
                     {"model-00002-of-00002.safetensors", "missing", path("copy")});
  write_bytes(path("copy/extra.safetensors"), "x");
  write_bytes(path("copy/model-00002-of-00002.safetensors"), std::string(100, 'b'));
  expect_input_error([&] { check_same_base_model(saved, identify_base_model(path("copy"), 0), "ck"); },
                     {"extra.safetensors", "did not have"});
  expect_input_error([&] { check_same_base_model(saved, identify_base_model("", 5), "ck"); },
                     {"random initialisation (seed 5)", path("base")});
  expect_input_error([&] { check_same_base_model(identify_base_model("", 5), identify_base_model("", 6), "ck"); },
                     {"seed 5", "seed 6"});
}

}  // namespace
