// The HuggingFace side of reward and value models: config.json of the classification classes (one label), start
// weights from a ...ForSequenceClassification / ...ForTokenClassification directory or from a causal LM, the head in
// checkpoint metadata (format version 2), resuming under another head, and veomni-ckpt-shard / -merge of them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint_consistency.h"
#include "ckpt/checkpoint_reader.h"
#include "ckpt/checkpoint_restore.h"
#include "ckpt/merge_to_hf.h"
#include "ckpt/shard_from_hf.h"
#include "io/hf_checkpoint.h"
#include "io/json_file.h"
#include "model/model_head.h"
#include "test_ckpt_util.h"
#include "train/train_model.h"

using namespace veomni;
using namespace veomni::test;
using veomni::testing::expect_input_error;

namespace {

const std::string kCausalLm = std::string(VEOMNI_FIXTURES_DIR) + "/hf/qwen3_toy/model";

ModelConfig value_toy_config() { return load_model_config(kCausalLm); }

// score.weight [1, hidden] (and score.bias [1]) values a classification directory holds: not the HF init's.
Tensor score_weight(int64_t hidden) {
  std::vector<float> v(static_cast<size_t>(hidden));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>(i) - 0.3f;
  return Tensor::from_vector(v, {1, hidden});
}
Tensor score_bias() { return Tensor::from_vector(std::vector<float>{0.25f}, {1}); }

// A HF classification directory made from the toy causal LM: its body tensors, score.weight (with score.bias for
// the token-value head), no lm_head.weight, and config.json as transformers saves the class with num_labels 1, then
// `patch` applied (JSON merge patch: null removes a key).
void write_classification_dir(const std::string& dir, ModelHead head, const nlohmann::json& patch = {}) {
  std::filesystem::create_directories(dir);
  nlohmann::json config = read_json_file(kCausalLm + "/config.json");
  set_hf_head_keys(config, "qwen3", head);
  if (!patch.is_null()) config.merge_patch(patch);
  write_json_file(dir + "/config.json", config);
  const HfCheckpointReader source(kCausalLm);
  std::map<std::string, Tensor> tensors;
  for (const std::string& name : source.names())
    if (name != "lm_head.weight") tensors[name] = source.read(name);
  tensors["score.weight"] = score_weight(value_toy_config().hidden_size);
  if (head == ModelHead::TokenValue) tensors["score.bias"] = score_bias();
  HfCheckpointWriter writer(dir, uint64_t{1} << 40);
  for (const auto& [name, t] : tensors) writer.declare(name, t.dtype(), t.shape());
  for (const auto& [name, t] : tensors) writer.write(name, t);
  writer.finish();
}

std::unique_ptr<TrainModel> started_model(ModelHead head, const std::string& model_path, uint64_t seed = 7) {
  auto model = std::make_unique<TrainModel>(value_toy_config(), ModelOptions{}, head);
  model->params().materialize_all(Device::cpu(), DType::F32);
  load_start_weights(*model, model_path, seed);
  return model;
}

std::vector<float> param_values_of(TrainModel& model, const std::string& name) {
  for (const auto& p : model.params().all())
    if (p->name == name) return p->value.to_float_vector();
  ADD_FAILURE() << "no parameter " << name;
  return {};
}

class ValueModelHf : public veomni::testing::ScratchDir {};

}  // namespace

TEST(ModelHeadHf, ConfigNamesTheClassAndOneLabel) {
  const ModelConfig dense = value_toy_config();
  const nlohmann::json lm = model_config_to_json(dense);
  EXPECT_EQ(lm["architectures"], nlohmann::json::array({"Qwen3ForCausalLM"}));
  EXPECT_FALSE(lm.contains("id2label"));
  const nlohmann::json reward = model_config_to_json(dense, ModelHead::SequenceReward);
  EXPECT_EQ(reward["architectures"], nlohmann::json::array({"Qwen3ForSequenceClassification"}));
  EXPECT_EQ(reward["id2label"], nlohmann::json({{"0", "LABEL_0"}}));
  EXPECT_EQ(reward["label2id"], nlohmann::json({{"LABEL_0", 0}}));
  EXPECT_FALSE(reward.contains("classifier_dropout"));
  const nlohmann::json value = model_config_to_json(dense, ModelHead::TokenValue);
  EXPECT_EQ(value["architectures"], nlohmann::json::array({"Qwen3ForTokenClassification"}));
  EXPECT_EQ(value["classifier_dropout"], 0.0);
  const ModelConfig moe = load_model_config(std::string(VEOMNI_FIXTURES_DIR) + "/hf/qwen3_moe_toy/model");
  EXPECT_EQ(model_config_to_json(moe, ModelHead::SequenceReward)["architectures"][0],
            "Qwen3MoeForSequenceClassification");
  EXPECT_EQ(model_config_to_json(moe, ModelHead::TokenValue)["architectures"][0], "Qwen3MoeForTokenClassification");
  // A config read from a classification directory keeps one label and drops a stray num_labels.
  ModelConfig edited = dense;
  edited.extra_json = R"({"num_labels": 1, "pad_token_id": 3})";
  const nlohmann::json written = model_config_to_json(edited, ModelHead::SequenceReward);
  EXPECT_FALSE(written.contains("num_labels"));
  EXPECT_EQ(written["pad_token_id"], 3);
  EXPECT_NO_THROW(check_hf_single_label(written, "config.json"));
}

TEST(ModelHeadHf, SingleLabelCheckNamesFileAndKey) {
  nlohmann::json config = {{"id2label", {{"0", "LABEL_0"}}}, {"label2id", {{"LABEL_0", 0}}}};
  EXPECT_NO_THROW(check_hf_single_label(config, "m/config.json"));
  EXPECT_NO_THROW(check_hf_single_label({{"num_labels", 1}}, "m/config.json"));
  expect_input_error([] { check_hf_single_label({{"model_type", "qwen3"}}, "m/config.json"); },
                     {"m/config.json", "'id2label' is absent", "2 labels", "LABEL_0"});
  expect_input_error(
      [] { check_hf_single_label({{"id2label", {{"0", "bad"}, {"1", "good"}}}}, "m/config.json"); },
      {"m/config.json", "key 'id2label' lists 2 labels", "num_labels 1"});
  expect_input_error([] { check_hf_single_label({{"num_labels", 3}}, "m/config.json"); },
                     {"m/config.json", "key 'num_labels' is 3"});
  expect_input_error([] { check_hf_single_label({{"id2label", "LABEL_0"}}, "m/config.json"); },
                     {"m/config.json", "key 'id2label' must be an object"});
  config["label2id"] = {{"A", 0}, {"B", 1}};
  expect_input_error([&] { check_hf_single_label(config, "m/config.json"); }, {"key 'label2id' lists 2 labels"});
}

TEST_F(ValueModelHf, ValueHeadFromCausalLmStartsAsTransformersInitialisesIt) {
  for (ModelHead head : {ModelHead::SequenceReward, ModelHead::TokenValue}) {
    SCOPED_TRACE(model_head_name(head));
    auto loaded = started_model(head, kCausalLm, 11);
    // The body is the causal LM's; the head's draws are those of a random init with the same seed.
    const HfCheckpointReader source(kCausalLm);
    EXPECT_EQ(param_values_of(*loaded, "model.layers.1.mlp.down_proj.weight"),
              source.read("model.layers.1.mlp.down_proj.weight").to_float_vector());
    auto fresh = started_model(head, "", 11);
    const std::vector<float> weight = param_values_of(*loaded, "score.weight");
    EXPECT_EQ(weight, param_values_of(*fresh, "score.weight"));
    double sum_sq = 0;
    for (float w : weight) sum_sq += double{w} * w;
    EXPECT_NEAR(std::sqrt(sum_sq / static_cast<double>(weight.size())), 0.02, 0.01);  // initializer_range
    EXPECT_NE(weight, param_values_of(*started_model(head, kCausalLm, 12), "score.weight"));  // train.seed seeds it
    if (head == ModelHead::TokenValue) {
      EXPECT_EQ(param_values_of(*loaded, "score.bias"), std::vector<float>{0.0f});
    }
  }
}

TEST_F(ValueModelHf, ValueHeadFromClassificationDirectoryReadsScore) {
  write_classification_dir(path("reward"), ModelHead::SequenceReward);
  write_classification_dir(path("value"), ModelHead::TokenValue);
  const std::vector<float> weight = score_weight(value_toy_config().hidden_size).to_float_vector();
  auto reward = started_model(ModelHead::SequenceReward, path("reward"));
  EXPECT_EQ(param_values_of(*reward, "score.weight"), weight);
  EXPECT_EQ(param_values_of(*reward, "model.norm.weight"),
            HfCheckpointReader(kCausalLm).read("model.norm.weight").to_float_vector());
  auto value = started_model(ModelHead::TokenValue, path("value"));
  EXPECT_EQ(param_values_of(*value, "score.weight"), weight);
  EXPECT_EQ(param_values_of(*value, "score.bias"), score_bias().to_float_vector());
  // A value model from a reward model: its weight, a zero bias; a reward model from a value model drops the bias.
  auto value_from_reward = started_model(ModelHead::TokenValue, path("reward"));
  EXPECT_EQ(param_values_of(*value_from_reward, "score.weight"), weight);
  EXPECT_EQ(param_values_of(*value_from_reward, "score.bias"), std::vector<float>{0.0f});
  EXPECT_EQ(param_values_of(*started_model(ModelHead::SequenceReward, path("value")), "score.weight"), weight);
}

TEST_F(ValueModelHf, ClassificationDirectoryOfMoreLabelsIsAnInputError) {
  write_classification_dir(path("two"), ModelHead::SequenceReward,
                           {{"id2label", {{"0", "LABEL_0"}, {"1", "LABEL_1"}}}, {"label2id", nullptr}});
  expect_input_error([&] { started_model(ModelHead::SequenceReward, path("two")); },
                     {path("two/config.json"), "key 'id2label' lists 2 labels"});
  write_classification_dir(path("none"), ModelHead::TokenValue, {{"id2label", nullptr}, {"label2id", nullptr}});
  expect_input_error([&] { started_model(ModelHead::TokenValue, path("none")); },
                     {path("none/config.json"), "'id2label' is absent"});
}

TEST_F(ValueModelHf, CausalLmObjectiveFromRewardModelIsAnInputErrorWithAHint) {
  write_classification_dir(path("reward"), ModelHead::SequenceReward);
  expect_input_error([&] { started_model(ModelHead::LanguageModel, path("reward")); },
                     {path("reward"), "score.weight and no lm_head.weight", "Qwen3ForSequenceClassification",
                      "sft, dpo or ppo_actor", "hint"});
  // Also with tied embeddings, where the embedding would silently serve as the LM head.
  ModelConfig tied = value_toy_config();
  tied.tie_word_embeddings = true;
  TrainModel model(tied, ModelOptions{});
  model.params().materialize_all(Device::cpu(), DType::F32);
  expect_input_error([&] { load_start_weights(model, path("reward"), 1); }, {"no lm_head.weight"});
}

TEST_F(ValueModelHf, MetadataRecordsTheHeadInFormatVersion2) {
  for (ModelHead head : {ModelHead::LanguageModel, ModelHead::SequenceReward, ModelHead::TokenValue}) {
    SCOPED_TRACE(model_head_name(head));
    CheckpointMetadata m;
    m.producer = "test";
    m.model_config = value_toy_config();
    m.head = head;
    m.params.push_back(checkpoint_param("score.weight", {1, 64}, false, m.mesh));
    m.rank_files.push_back({rank_file_name(0, 1), 1, 0});
    const nlohmann::json j = nlohmann::json::parse(checkpoint_metadata_to_json(m).dump());
    const bool lm = head == ModelHead::LanguageModel;
    EXPECT_EQ(j["format_version"], lm ? 1 : 2);  // the oldest version that describes it
    EXPECT_EQ(j.contains("model_head"), !lm);
    if (!lm) {
      EXPECT_EQ(j["model_head"], model_head_name(head));
      EXPECT_EQ(j["model_config"]["architectures"][0], hf_architecture("qwen3", head));
    }
    EXPECT_EQ(checkpoint_metadata_from_json(j, "m.json").head, head);
    nlohmann::json edited = j;
    if (lm) {
      edited["model_head"] = "token_value";
      expect_input_error([&] { checkpoint_metadata_from_json(edited, "m.json"); },
                         {"m.json", "'model_head' needs format_version 2"});
      edited.erase("model_head");
      edited["format_version"] = 6;
      expect_input_error([&] { checkpoint_metadata_from_json(edited, "m.json"); },
                         {"m.json", "format version 6", "versions 1 to 5"});
    } else {
      edited["model_head"] = "critic";
      expect_input_error([&] { checkpoint_metadata_from_json(edited, "m.json"); },
                         {"m.json", "key 'model_head'", "'critic' is not one of"});
      edited.erase("model_head");
      expect_input_error([&] { checkpoint_metadata_from_json(edited, "m.json"); }, {"m.json", "missing key 'model_head'"});
    }
  }
}

TEST_F(ValueModelHf, ShardAndMergeRoundTripKeepTheHead) {
  struct Case {
    ModelHead head;
    const char* architecture;
  };
  for (const Case& c : {Case{ModelHead::SequenceReward, "Qwen3ForSequenceClassification"},
                        Case{ModelHead::TokenValue, "Qwen3ForTokenClassification"}}) {
    const std::string tag = model_head_name(c.head);
    SCOPED_TRACE(tag);
    write_classification_dir(path(tag), c.head);
    ShardFromHfOptions options;
    options.mesh = {2, 1, 1};
    const ShardFromHfSummary sharded = shard_hf_checkpoint(path(tag), path(tag + "_ck"), options);
    EXPECT_EQ(sharded.head, c.head);
    const CheckpointReader reader(path(tag + "_ck"));
    EXPECT_EQ(reader.metadata().head, c.head);
    EXPECT_NO_THROW(check_params_match_model_config(reader));
    const MergeSummary merged = merge_checkpoint_to_hf(path(tag + "_ck"), path(tag + "_hf"), MergeOptions{});
    EXPECT_EQ(merged.architecture, c.architecture);
    const HfCheckpointReader original(path(tag)), out(path(tag + "_hf"));
    EXPECT_EQ(out.names(), original.names());  // model.* + score.* and no lm_head.weight
    EXPECT_FALSE(out.contains("lm_head.weight"));
    for (const std::string& name : out.names())
      EXPECT_EQ(out.read(name).to_float_vector(), original.read(name).to_float_vector()) << name;
    const nlohmann::json config = read_json_file(path(tag + "_hf/config.json"));
    EXPECT_EQ(config["architectures"], nlohmann::json::array({c.architecture}));
    EXPECT_EQ(config["id2label"], nlohmann::json({{"0", "LABEL_0"}}));
    EXPECT_NO_THROW(check_hf_single_label(config, "config.json"));
  }
  // A directory saying two labels is refused by the shard tool too.
  write_classification_dir(path("two"), ModelHead::TokenValue, {{"id2label", {{"0", "A"}, {"1", "B"}}}});
  ShardFromHfOptions options;
  options.mesh = {1, 1, 1};
  expect_input_error([&] { shard_hf_checkpoint(path("two"), path("two_ck"), options); },
                     {path("two/config.json"), "key 'id2label' lists 2 labels"});
  EXPECT_FALSE(std::filesystem::exists(path("two_ck")));
}

TEST_F(ValueModelHf, ResumingUnderAnotherHeadNamesBoth) {
  write_classification_dir(path("reward"), ModelHead::SequenceReward);
  ShardFromHfOptions options;
  options.mesh = {1, 1, 1};
  shard_hf_checkpoint(path("reward"), path("ck"), options);
  const CheckpointReader reader(path("ck"));
  ParamHooks no_values;
  ModelOptions model_options;
  model_options.hooks.params = &no_values;
  for (ModelHead head : {ModelHead::LanguageModel, ModelHead::TokenValue}) {
    TrainModel model(value_toy_config(), model_options, head);
    std::vector<ParamShardState> shards;
    for (const auto& p : model.params().all()) shards.push_back({p->name, p->shape, p->is_expert, {}, {}, {}});
    expect_input_error([&] { check_checkpoint_model(reader, value_toy_config(), head, shards); },
                       {"metadata.json", "model head is sequence_reward (train.objective reward)",
                        fmt::format("trains the {} head", model_head_name(head))});
  }
  TrainModel same(value_toy_config(), model_options, ModelHead::SequenceReward);
  std::vector<ParamShardState> shards;
  for (const auto& p : same.params().all()) shards.push_back({p->name, p->shape, p->is_expert, {}, {}, {}});
  EXPECT_NO_THROW(check_checkpoint_model(reader, value_toy_config(), ModelHead::SequenceReward, shards));
}
