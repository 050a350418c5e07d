// Unit tests of model/model_config: the toy configs, both spellings of θ and the expert count, defaults, every
// validation error, layer sparsity and the transformers 5.x form written back.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "core/error.h"
#include "io/json_file.h"
#include "model/model_config.h"
#include "tests/common/expect_error.h"

using namespace veomni;
using nlohmann::json;

namespace {

const std::string kSource = VEOMNI_SOURCE_DIR;
const std::string kDenseToy = kSource + "/configs/model_configs/qwen3_toy/config.json";
const std::string kMoeToy = kSource + "/configs/model_configs/qwen3_moe_toy/config.json";
const std::string kLegacyMoe = std::string(VEOMNI_FIXTURES_DIR) + "/configs/legacy_qwen3_moe/config.json";

json dense_toy() { return read_json_file(kDenseToy); }
json moe_toy() { return read_json_file(kMoeToy); }

// Expects an InputError whose message holds every fragment (the source, the key, the reason).
using veomni::testing::expect_input_error;

void expect_rejected(const json& config, std::initializer_list<std::string> fragments) {
  expect_input_error([&] { model_config_from_json(config, "cfg.json"); }, fragments);
}

class TempDir {
 public:
  TempDir() : path_(std::filesystem::temp_directory_path() / ("veomni_model_config_" + std::to_string(getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace

TEST(ModelConfig, LoadsDenseToy) {
  const ModelConfig c = load_model_config(kDenseToy);
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(c.vocab_size, 1024);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.q_size(), 64);
  EXPECT_EQ(c.kv_size(), 32);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.initializer_range, 0.02);
  EXPECT_EQ(c.dtype, "float32");
  EXPECT_FALSE(c.is_moe());
  EXPECT_FALSE(c.layer_is_sparse(0));
  EXPECT_FALSE(c.layer_is_sparse(1));
}

TEST(ModelConfig, LoadsMoeToyFromItsDirectory) {
  const ModelConfig c = load_model_config(kSource + "/configs/model_configs/qwen3_moe_toy");
  EXPECT_EQ(c.model_type, "qwen3_moe");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.num_experts, 8);  // spelled num_local_experts, as transformers 5.17 writes it
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 32);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_TRUE(c.output_router_logits);
  EXPECT_EQ(c.router_aux_loss_coef, 0.001);
  EXPECT_EQ(c.decoder_sparse_step, 1);
  EXPECT_TRUE(c.mlp_only_layers.empty());
  EXPECT_TRUE(c.is_moe());
  EXPECT_TRUE(c.layer_is_sparse(0));
  EXPECT_TRUE(c.layer_is_sparse(1));
}

TEST(ModelConfig, LoadsLegacySpellings) {
  // transformers 4.x form: top-level rope_theta, num_experts, torch_dtype, no head_dim.
  const ModelConfig c = load_model_config(kLegacyMoe);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.num_experts, 4);
  EXPECT_EQ(c.dtype, "bfloat16");
  EXPECT_EQ(c.head_dim, 96 / 6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.initializer_range, 0.01);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_EQ(c.router_aux_loss_coef, 0.02);
  // decoder_sparse_step 2 makes layers 1 and 3 sparse; mlp_only_layers [3] turns layer 3 dense.
  EXPECT_FALSE(c.layer_is_sparse(0));
  EXPECT_TRUE(c.layer_is_sparse(1));
  EXPECT_FALSE(c.layer_is_sparse(2));
  EXPECT_FALSE(c.layer_is_sparse(3));
}

TEST(ModelConfig, RopeThetaSpellings) {
  json j = dense_toy();
  j.erase("rope_parameters");
  EXPECT_EQ(model_config_from_json(j, "cfg.json").rope_theta, 10000.0);  // transformers' default θ
  j["rope_theta"] = 250000.0;
  EXPECT_EQ(model_config_from_json(j, "cfg.json").rope_theta, 250000.0);
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 123456.0}};
  EXPECT_EQ(model_config_from_json(j, "cfg.json").rope_theta, 123456.0);  // rope_parameters wins, as in transformers
  j["rope_parameters"] = {{"rope_type", "default"}};
  EXPECT_EQ(model_config_from_json(j, "cfg.json").rope_theta, 250000.0);
  j["rope_parameters"] = nullptr;
  j["rope_scaling"] = {{"type", "default"}};
  EXPECT_EQ(model_config_from_json(j, "cfg.json").rope_theta, 250000.0);
}

TEST(ModelConfig, RejectsRopeVariants) {
  json j = dense_toy();
  j["rope_parameters"]["rope_type"] = "yarn";
  expect_rejected(j, {"cfg.json", "rope_parameters.rope_type", "\"yarn\"", "only \"default\""});
  j = dense_toy();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  expect_rejected(j, {"cfg.json", "rope_scaling.type", "\"linear\""});
  j = dense_toy();
  j["rope_parameters"]["partial_rotary_factor"] = 0.5;
  expect_rejected(j, {"rope_parameters.partial_rotary_factor", "0.5"});
  j = dense_toy();
  j["rope_parameters"] = "default";
  expect_rejected(j, {"'rope_parameters'", "expected an object"});
  j = dense_toy();
  j["rope_parameters"]["rope_theta"] = "1e6";
  expect_rejected(j, {"rope_parameters.rope_theta", "expected a number"});
}

TEST(ModelConfig, ExpertCountSpellings) {
  json j = moe_toy();
  j.erase("num_local_experts");
  j["num_experts"] = 16;
  EXPECT_EQ(model_config_from_json(j, "cfg.json").num_experts, 16);
  j["num_local_experts"] = 16;
  EXPECT_EQ(model_config_from_json(j, "cfg.json").num_experts, 16);
  j["num_local_experts"] = 32;
  expect_rejected(j, {"cfg.json", "'num_local_experts'", "32", "num_experts = 16"});
  j.erase("num_local_experts");
  j.erase("num_experts");
  EXPECT_EQ(model_config_from_json(j, "cfg.json").num_experts, 128);  // Qwen3MoeConfig's default
}

TEST(ModelConfig, DefaultsFollowTransformers) {
  const ModelConfig dense = model_config_from_json(json{{"model_type", "qwen3"}}, "cfg.json");
  EXPECT_EQ(dense.vocab_size, 151936);
  EXPECT_EQ(dense.hidden_size, 4096);
  EXPECT_EQ(dense.intermediate_size, 22016);
  EXPECT_EQ(dense.num_hidden_layers, 32);
  EXPECT_EQ(dense.num_attention_heads, 32);
  EXPECT_EQ(dense.num_key_value_heads, 32);  // None -> num_attention_heads
  EXPECT_EQ(dense.head_dim, 128);            // Qwen3Config.head_dim default, not hidden / heads
  EXPECT_EQ(dense.rope_theta, 10000.0);
  EXPECT_EQ(dense.num_experts, 0);

  const ModelConfig moe = model_config_from_json(json{{"model_type", "qwen3_moe"}}, "cfg.json");
  EXPECT_EQ(moe.hidden_size, 2048);
  EXPECT_EQ(moe.intermediate_size, 6144);
  EXPECT_EQ(moe.num_hidden_layers, 24);
  EXPECT_EQ(moe.num_key_value_heads, 4);
  EXPECT_EQ(moe.head_dim, 2048 / 32);  // no head_dim field: hidden / heads
  EXPECT_EQ(moe.num_experts, 128);
  EXPECT_EQ(moe.num_experts_per_tok, 8);
  EXPECT_EQ(moe.moe_intermediate_size, 768);
  EXPECT_FALSE(moe.norm_topk_prob);
  EXPECT_FALSE(moe.output_router_logits);
  EXPECT_EQ(moe.router_aux_loss_coef, 0.001);

  json j = dense_toy();
  j["num_key_value_heads"] = nullptr;  // null reads as absent, as Python's None
  EXPECT_EQ(model_config_from_json(j, "cfg.json").num_key_value_heads, 4);
  j = moe_toy();
  j.erase("head_dim");
  j["hidden_size"] = 128;
  EXPECT_EQ(model_config_from_json(j, "cfg.json").head_dim, 32);
}

TEST(ModelConfig, LayerIsSparse) {
  json j = moe_toy();
  j["num_hidden_layers"] = 6;
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {5};
  const ModelConfig c = model_config_from_json(j, "cfg.json");
  const bool expected[6] = {false, true, false, true, false, false};
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(c.layer_is_sparse(i), expected[i]) << "layer " << i;

  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = {0, 2};
  const ModelConfig d = model_config_from_json(j, "cfg.json");
  const bool expected_d[6] = {false, true, false, true, true, true};
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(d.layer_is_sparse(i), expected_d[i]) << "layer " << i;
}

TEST(ModelConfig, RejectsUnknownOrMissingModelType) {
  json j = dense_toy();
  j["model_type"] = "llama";
  expect_rejected(j, {"cfg.json", "'model_type'", "\"llama\"", "qwen3, qwen3_moe"});
  j.erase("model_type");
  expect_rejected(j, {"cfg.json", "'model_type'", "missing", "qwen3, qwen3_moe"});
  expect_rejected(json::array({1, 2}), {"cfg.json", "JSON object", "array"});
}

TEST(ModelConfig, RejectsNonPositiveSizes) {
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                          "num_key_value_heads", "head_dim"}) {
    json j = dense_toy();
    j[key] = 0;
    expect_rejected(j, {"cfg.json", std::string("'") + key + "'", "must be positive, got 0"});
  }
  json j = dense_toy();
  j["vocab_size"] = -5;
  expect_rejected(j, {"'vocab_size'", "got -5"});
}

TEST(ModelConfig, RejectsInconsistentAttention) {
  json j = dense_toy();
  j["num_key_value_heads"] = 3;
  expect_rejected(j, {"cfg.json", "'num_key_value_heads'", "num_attention_heads (4)", "multiple of it (3)"});
  j = dense_toy();
  j["head_dim"] = 15;
  expect_rejected(j, {"'head_dim'", "even", "15"});
  j = dense_toy();
  j["rms_norm_eps"] = 0.0;
  expect_rejected(j, {"'rms_norm_eps'", "positive"});
  j = dense_toy();
  j["rope_parameters"]["rope_theta"] = -1.0;
  expect_rejected(j, {"rope_theta", "positive"});
  j = dense_toy();
  j["initializer_range"] = -0.1;
  expect_rejected(j, {"'initializer_range'", ">= 0"});
}

TEST(ModelConfig, RejectsUnsupportedFeatures) {
  json j = dense_toy();
  j["attention_bias"] = true;
  expect_rejected(j, {"cfg.json", "'attention_bias'", "not supported"});
  j = dense_toy();
  j["hidden_act"] = "gelu";
  expect_rejected(j, {"'hidden_act'", "\"gelu\"", "silu"});
  j = dense_toy();
  j["use_sliding_window"] = true;
  expect_rejected(j, {"'use_sliding_window'", "not supported"});
  j = dense_toy();
  j["attention_dropout"] = 0.1;
  expect_rejected(j, {"'attention_dropout'", "0.1"});
  j = dense_toy();
  j["layer_types"] = json::array({"full_attention", "sliding_attention"});
  expect_rejected(j, {"'layer_types'", "\"sliding_attention\""});
}

TEST(ModelConfig, RejectsWrongTypes) {
  json j = dense_toy();
  j["hidden_size"] = "64";
  expect_rejected(j, {"cfg.json", "'hidden_size'", "expected an integer", "\"64\""});
  j = dense_toy();
  j["hidden_size"] = 64.5;
  expect_rejected(j, {"'hidden_size'", "expected an integer", "64.5"});
  j = dense_toy();
  j["tie_word_embeddings"] = "yes";
  expect_rejected(j, {"'tie_word_embeddings'", "expected true or false"});
  j = dense_toy();
  j["rms_norm_eps"] = "small";
  expect_rejected(j, {"'rms_norm_eps'", "expected a number"});
  j = moe_toy();
  j["mlp_only_layers"] = {0, "1"};
  expect_rejected(j, {"'mlp_only_layers'", "a list of integers"});
  j = dense_toy();
  j["model_type"] = 3;
  expect_rejected(j, {"'model_type'", "expected a string"});
}

TEST(ModelConfig, RejectsBadExpertSettings) {
  json j = moe_toy();
  j["num_local_experts"] = 0;
  expect_rejected(j, {"cfg.json", "'num_local_experts'", "at least one expert"});
  j = moe_toy();
  j["num_experts_per_tok"] = 9;
  expect_rejected(j, {"'num_experts_per_tok'", "9 exceeds the number of experts (8)"});
  j = moe_toy();
  j["num_experts_per_tok"] = 0;
  expect_rejected(j, {"'num_experts_per_tok'", "must be positive"});
  j = moe_toy();
  j["moe_intermediate_size"] = 0;
  expect_rejected(j, {"'moe_intermediate_size'", "must be positive"});
  j = moe_toy();
  j["decoder_sparse_step"] = 0;
  expect_rejected(j, {"'decoder_sparse_step'", "must be positive"});
  j = moe_toy();
  j["mlp_only_layers"] = {2};
  expect_rejected(j, {"'mlp_only_layers'", "layer 2 is out of range [0, 2)"});
  j = moe_toy();
  j["mlp_only_layers"] = {-1};
  expect_rejected(j, {"'mlp_only_layers'", "layer -1"});
  j = moe_toy();
  j["router_aux_loss_coef"] = -0.5;
  expect_rejected(j, {"'router_aux_loss_coef'", ">= 0"});
}

TEST(ModelConfig, LoadErrorsNameTheFile) {
  const TempDir dir;
  expect_input_error([&] { load_model_config(dir.file("missing.json")); }, {"missing.json", "does not exist"});
  expect_input_error([&] { load_model_config(dir.path().string()); }, {"config.json", "no config.json"});
  const std::string bad = dir.file("bad.json");
  std::ofstream(bad) << "{\"model_type\": \"qwen3\",\n \"hidden_size\": }";
  expect_input_error([&] { load_model_config(bad); }, {"bad.json:2:", "invalid JSON"});
  const std::string wrong = dir.file("wrong.json");
  std::ofstream(wrong) << R"({"model_type": "qwen3", "hidden_size": "big"})";
  expect_input_error([&] { load_model_config(wrong); }, {"wrong.json", "'hidden_size'"});
}

TEST(ModelConfig, WritesTheTransformers517Form) {
  // The toys are byte for byte what transformers 5.17 save_pretrained writes (less transformers_version); our
  // writer reproduces them, adding num_experts beside num_local_experts for transformers 4.x readers.
  EXPECT_EQ(model_config_to_json(load_model_config(kDenseToy)), dense_toy());
  json moe_expected = moe_toy();
  moe_expected["num_experts"] = 8;
  EXPECT_EQ(model_config_to_json(load_model_config(kMoeToy)), moe_expected);
}

TEST(ModelConfig, WriterModernisesLegacyFilesAndKeepsForeignKeys) {
  const json out = model_config_to_json(load_model_config(kLegacyMoe));
  EXPECT_EQ(out["rope_parameters"], (json{{"rope_theta", 500000.0}, {"rope_type", "default"}}));
  EXPECT_FALSE(out.contains("rope_theta"));
  EXPECT_FALSE(out.contains("rope_scaling"));
  EXPECT_FALSE(out.contains("torch_dtype"));
  EXPECT_FALSE(out.contains("transformers_version"));
  EXPECT_EQ(out["dtype"], "bfloat16");
  EXPECT_EQ(out["num_local_experts"], 4);
  EXPECT_EQ(out["num_experts"], 4);
  EXPECT_EQ(out["head_dim"], 16);
  EXPECT_EQ(out["mlp_only_layers"], json::array({3}));
  EXPECT_EQ(out["tie_word_embeddings"], true);
  EXPECT_EQ(out["architectures"], json::array({"Qwen3MoeForCausalLM"}));
  // Keys nothing here interprets travel unchanged.
  EXPECT_EQ(out["bos_token_id"], 151643);
  EXPECT_EQ(out["eos_token_id"], 151645);
  EXPECT_EQ(out["max_window_layers"], 4);
  EXPECT_EQ(out["use_cache"], true);
}

TEST(ModelConfig, SaveAndLoadRoundTrip) {
  const TempDir dir;
  ModelConfig c = load_model_config(kLegacyMoe);
  c.num_experts = 8;
  c.mlp_only_layers = {0, 2};
  save_model_config(c, dir.file("config.json"));
  const ModelConfig back = load_model_config(dir.path().string());
  EXPECT_EQ(model_config_to_json(back), model_config_to_json(c));
  EXPECT_EQ(back.num_experts, 8);
  EXPECT_EQ(back.mlp_only_layers, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(back.rope_theta, 500000.0);
}

TEST(ModelConfig, WriterRefusesAnInvalidConfig) {
  ModelConfig c = load_model_config(kDenseToy);
  c.num_key_value_heads = 3;
  expect_input_error([&] { model_config_to_json(c); }, {"model config", "'num_key_value_heads'"});
  c = load_model_config(kDenseToy);
  c.model_type = "gpt2";
  expect_input_error([&] { model_config_to_json(c); }, {"'model_type'", "\"gpt2\""});
}

TEST(ModelConfig, EveryWrittenKeyIsReadBack) {
  // What the writer puts in config.json is what the reader interprets: nothing of it lands in extra_json, and a
  // change to any key survives the round trip.
  for (const json& source : {dense_toy(), moe_toy()}) {
    const ModelConfig c = model_config_from_json(source, "cfg.json");
    const json written = model_config_to_json(c);
    const ModelConfig back = model_config_from_json(written, "written");
    const json extra = back.extra_json.empty() ? json::object() : json::parse(back.extra_json);
    for (const auto& [key, value] : extra.items())
      EXPECT_TRUE(key == "bos_token_id" || key == "eos_token_id" || key == "pad_token_id" || key == "use_cache" ||
                  key == "max_window_layers")
          << key << " is written but not interpreted";
    EXPECT_EQ(model_config_to_json(back), written);
  }
}

TEST(ModelConfig, ArchitectureDifferencesFollowTheKeyTable) {
  const ModelConfig a = model_config_from_json(moe_toy(), "cfg.json");
  ModelConfig b = a;
  EXPECT_TRUE(model_architecture_differences(a, b).empty());
  b.initializer_range = 0.5;        // not part of the shape
  b.max_position_embeddings = 128;  // kept, not used by training
  EXPECT_TRUE(model_architecture_differences(a, b).empty());
  b.moe_intermediate_size += 2;
  b.norm_topk_prob = !a.norm_topk_prob;
  b.rope_theta = 7.0;
  const auto differences = model_architecture_differences(a, b);
  ASSERT_EQ(differences.size(), 3u);
  EXPECT_EQ(differences[0].rfind("rope_parameters:", 0), 0u) << differences[0];
  EXPECT_EQ(differences[1].rfind("moe_intermediate_size:", 0), 0u) << differences[1];
  EXPECT_EQ(differences[2].rfind("norm_topk_prob:", 0), 0u) << differences[2];
}

TEST(ModelConfig, SizeBoundsNameTheKey) {
  json j = dense_toy();
  j["num_hidden_layers"] = 5000;
  expect_rejected(j, {"cfg.json", "'num_hidden_layers'", "5000 is more than 1024"});
  j = moe_toy();
  j["decoder_sparse_step"] = 0;
  expect_rejected(j, {"'decoder_sparse_step'", "must be positive"});
  // A dense model's file may carry MoE keys with any value: they are not read.
  j = dense_toy();
  j["decoder_sparse_step"] = 0;
  EXPECT_NO_THROW(model_config_from_json(j, "cfg.json"));
}
