// Reward and value models trained by veomni-train and merged by veomni-ckpt-merge give in transformers
// (AutoModelForSequenceClassification / AutoModelForTokenClassification) the rewards and values our loaded model
// computes: transformers' numbers on the toy batch were recorded by scripts/check_merged_value_models.py (run by
// scripts/make_value_model_fixtures.sh where torch is). A missing fixture fails the test.
#include <gtest/gtest.h>

#include <filesystem>

#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/model_head.h"
#include "tests/common/hf_fixture.h"
#include "train/train_model.h"

using namespace veomni;

namespace {

struct TransformersValueFixture {
  std::string name;        // tests/fixtures/merged_value/<name>
  ModelHead head;          // what its config.json's architectures must name
  std::string batch_from;  // the HF fixture whose batch.json it was scored on
};

// Our rewards (each sequence's value at its last token) or values (every token) of the merged model on the batch.
Tensor our_values(const TransformersValueFixture& f, const std::string& dir, const Batch& batch) {
  const ModelConfig config = load_model_config(dir + "/model");
  const ModelHead head = hf_head_of_architectures(read_json_file(dir + "/model/config.json"), ModelHead::LanguageModel);
  EXPECT_EQ(head, f.head) << dir << "/model/config.json names another class";
  TrainModel model(config, ModelOptions{}, f.head);
  model.params().materialize_all(Device::cpu(), DType::F32);
  load_start_weights(model, dir + "/model", 0);
  MultimodalBatch input;
  input.text = batch;
  const BodyOutput body = model.body().forward(input, false);
  Tensor values = model.value_head().forward(body.hidden, false).values.to(Device::cpu());
  if (f.head == ModelHead::TokenValue) return values;
  std::vector<float> rewards;
  for (size_t s = 1; s < batch.cu_seqlens.size(); ++s) rewards.push_back(values.data<float>()[batch.cu_seqlens[s] - 1]);
  return Tensor::from_vector(rewards, {static_cast<int64_t>(rewards.size())});
}

void expect_matches_transformers(const TransformersValueFixture& f) {
  SCOPED_TRACE(f.name);
  const std::string dir = std::string(VEOMNI_FIXTURES_DIR) + "/merged_value/" + f.name;
  const std::string expected_file = dir + "/expected.safetensors";
  ASSERT_TRUE(std::filesystem::exists(expected_file) && std::filesystem::exists(dir + "/model/config.json"))
      << "missing fixture " << dir << ": run scripts/make_value_model_fixtures.sh where torch and transformers are";
  const char* key = f.head == ModelHead::TokenValue ? "values" : "rewards";
  const Tensor expected = SafetensorsReader(expected_file).read(key);
  const Tensor ours = our_values(f, dir, veomni::testing::load_hf_fixture(f.batch_from).batch);
  ASSERT_EQ(ours.shape(), expected.shape());
  const std::vector<float> a = ours.to_float_vector(), b = expected.to_dtype(DType::F32).to_float_vector();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-4) << key << "[" << i << "]";
    worst = std::max(worst, std::abs(double{a[i]} - b[i]));
  }
  std::printf("merged %s: %zu %s, max abs diff %.3g vs transformers\n", f.name.c_str(), a.size(), key, worst);
}

}  // namespace

TEST(ValueModelsInTransformers, DenseRewardModel) {
  expect_matches_transformers({"qwen3_toy_reward", ModelHead::SequenceReward, "qwen3_toy"});
}

TEST(ValueModelsInTransformers, DenseValueModel) {
  expect_matches_transformers({"qwen3_toy_value", ModelHead::TokenValue, "qwen3_toy"});
}

TEST(ValueModelsInTransformers, MoeRewardModel) {
  expect_matches_transformers({"qwen3_moe_toy_reward", ModelHead::SequenceReward, "qwen3_moe_toy"});
}

TEST(ValueModelsInTransformers, MoeValueModel) {
  expect_matches_transformers({"qwen3_moe_toy_value", ModelHead::TokenValue, "qwen3_moe_toy"});
}
