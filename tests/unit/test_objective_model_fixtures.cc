// Whole-model alignment of the DPO, reward, value and PPO actor objectives with transformers: our CPU fp32 model and
// objective against fixtures written by scripts/gen_objective_model_fixtures.py (loss, metrics, every parameter
// gradient, and the losses of three AdamW steps), on batches packed by the real collator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/hf_loader.h"
#include "model/weight_source.h"
#include "optim/adamw.h"
#include "tests/common/hf_fixture.h"
#include "tests/common/objective_model_fixture.h"
#include "train/objective.h"
#include "train/train_model.h"

using namespace veomni;

namespace {

constexpr double kObjectiveModelRelTol = 1e-4;
// Values are compared relative to at least 0.01, so that a metric of 0 (DPO's rewards against the start weights, a
// clip fraction) is compared to 1e-6 rather than exactly.
constexpr double kScaleFloor = 0.01;

using ObjectiveFixture = veomni::testing::ObjectiveModelFixture;
using veomni::testing::load_objective_model_fixture;
using veomni::testing::relative_error;

double tolerance(double expected) { return kObjectiveModelRelTol * std::max(std::fabs(expected), kScaleFloor); }

ModelOptions options_of(const ObjectiveFixture& f) {
  ModelOptions options;
  options.lora_config = f.lora;
  return options;
}

// A LoRA case's adapters start from adapters.safetensors (the base weights come from the model directory).
std::set<std::string> adapter_names(const TrainModel& model) {
  std::set<std::string> names;
  for (const Parameter* p : model.lora_params()) names.insert(p->name);
  return names;
}

void load_adapters(const ObjectiveFixture& f, TrainModel& model) {
  if (!model.has_lora()) return;
  SafetensorsReader adapters(f.dir + "/adapters.safetensors");
  EXPECT_EQ(adapters.entries().size(), model.lora_params().size()) << f.name << ": adapter count differs from PEFT's";
  for (Parameter* p : model.lora_params()) {
    EXPECT_TRUE(adapters.contains(p->name)) << f.name << ": adapters.safetensors lacks " << p->name;
    if (adapters.contains(p->name)) adapters.read_into(p->name, p->value);
  }
}

// A multimodal case's weights are stored under our names (tests/fixtures/thinker/models/*/weights.safetensors).
std::unique_ptr<TrainModel> load_multimodal_model(const ObjectiveFixture& f) {
  auto model = std::make_unique<TrainModel>(f.thinker, options_of(f), false, f.head);
  model->params().materialize_all(Device::cpu(), DType::F32);
  SafetensorsReader weights(f.model_dir + "/weights.safetensors");
  const std::set<std::string> adapters = adapter_names(*model);
  for (const auto& p : model->params().all()) {
    if (adapters.contains(p->name)) continue;
    EXPECT_TRUE(weights.contains(p->name)) << f.name << ": the fixture weights lack " << p->name;
    if (weights.contains(p->name)) weights.read_into(p->name, p->value);
  }
  load_adapters(f, *model);
  return model;
}

std::unique_ptr<TrainModel> load_objective_model(const ObjectiveFixture& f) {
  if (f.multimodal) return load_multimodal_model(f);
  auto model = std::make_unique<TrainModel>(f.config, options_of(f), f.head);
  model->params().materialize_all(Device::cpu(), DType::F32);
  load_hf_weights(model->params(), HfCheckpointSource(f.model_dir), adapter_names(*model));
  load_adapters(f, *model);
  return model;
}

// The policy with its objective (and, for DPO against the start weights, the frozen reference both share).
struct Setup {
  std::unique_ptr<TrainModel> model, reference;
  std::unique_ptr<Objective> objective;
  StepLossScale scale;
};

Setup set_up(const ObjectiveFixture& f) {
  Setup s;
  s.model = load_objective_model(f);
  if (f.model_reference) s.reference = load_objective_model(f);
  // A LoRA policy is its own reference with its adapters off (the frozen base).
  const bool adapters_off = f.expected.value("reference", nlohmann::json()) == "adapters_off";
  s.objective = make_objective(f.settings, f.config, adapters_off ? s.model.get() : s.reference.get());
  const int64_t normaliser = s.objective->normaliser(f.batch, true);
  const char* key = f.expected.contains("global_pairs") ? "global_pairs" : "global_tokens";
  EXPECT_EQ(normaliser, f.expected.at(key).get<int64_t>()) << f.name << " " << key;
  s.scale = s.objective->step_scale(normaliser, 1);
  return s;
}

// One step's forward and backward on the fixture's batch (gradients start from zero); its metrics.
ObjectiveMetrics run_step(Setup& s, const ObjectiveFixture& f) {
  s.model->params().zero_grads();
  std::vector<double> sums(s.objective->num_sums(), 0.0);
  s.objective->micro_batch(*s.model, f.batch, s.scale, true, sums);
  return s.objective->step_metrics(sums, s.scale);
}

double objective_loss_of(const ObjectiveMetrics& metrics, const std::string& name) {
  EXPECT_FALSE(metrics.empty()) << name;
  if (metrics.empty()) return NAN;
  EXPECT_EQ(metrics.front().first, "loss") << name << ": the first metric must be the loss";
  return metrics.front().second;
}

// The start model's logits [S, V] of the fixture's row against transformers' (LoRA cases store them).
void check_start_logits(const ObjectiveFixture& f, const Tensor& expected) {
  const std::unique_ptr<TrainModel> model = load_objective_model(f);
  BodyOutput body = model->body().forward(f.batch, false);
  Tensor logits;
  model->lm_head().loss_forward(body.hidden, f.batch.text.target_ids, false, &logits);
  const double err = relative_error(logits, expected);
  EXPECT_LE(err, kObjectiveModelRelTol) << f.name << " logits";
  std::printf("[%s] logits rel err %.3g\n", f.name.c_str(), err);
}

void check_loss_metrics_gradients(const std::string& name) {
  const ObjectiveFixture f = load_objective_model_fixture(name);
  ASSERT_EQ(veomni::testing::packed_row_difference(f), "") << name << ": the collator packs another row than the "
                                                                       "generator did";
  Setup s = set_up(f);
  const ObjectiveMetrics metrics = run_step(s, f);

  const double loss = objective_loss_of(metrics, name);
  const double expected_loss = f.expected.at("loss").get<double>();
  EXPECT_NEAR(loss, expected_loss, tolerance(expected_loss)) << name << " loss";
  std::printf("[%s] loss %.9g vs %.9g\n", name.c_str(), loss, expected_loss);
  for (const auto& [metric, value] : f.expected.at("metrics").items()) {
    const auto found = std::find_if(metrics.begin(), metrics.end(), [&](const auto& m) { return m.first == metric; });
    ASSERT_NE(found, metrics.end()) << name << ": no metric " << metric;
    const double expected = value.get<double>();
    EXPECT_NEAR(found->second, expected, tolerance(expected)) << name << " metric " << metric;
    std::printf("[%s]   %s %.9g vs %.9g\n", name.c_str(), metric.c_str(), found->second, expected);
  }

  SafetensorsReader grads(f.dir + "/expected.safetensors");
  size_t expected_grads = 0;
  for (const auto& entry : grads.entries()) expected_grads += entry.name.rfind("grad.", 0) == 0;
  double worst = 0;
  std::string worst_name;
  size_t trainable = 0;
  for (const auto& p : s.model->params().all()) {
    // Under LoRA the base is frozen: it must end with no gradient at all, and the fixture holds the adapters' only.
    if (!p->trainable) {
      EXPECT_FALSE(p->grad.defined()) << name << ": frozen " << p->name << " got a gradient";
      continue;
    }
    ++trainable;
    const std::string key = "grad." + p->name;
    ASSERT_TRUE(grads.contains(key)) << name << ": the fixture has no gradient for " << p->name;
    const double err = relative_error(p->grad, grads.read(key));
    EXPECT_LE(err, kObjectiveModelRelTol) << name << " gradient of " << p->name;
    if (err > worst) worst = err, worst_name = p->name;
  }
  EXPECT_EQ(trainable, expected_grads) << name << ": trainable parameter count differs from transformers'";
  if (grads.contains("logits")) check_start_logits(f, grads.read("logits"));
  std::printf("[%s] worst gradient rel err %.3g (%s)\n", name.c_str(), worst, worst_name.c_str());
}

void check_objective_adamw_steps(const std::string& name) {
  const ObjectiveFixture f = load_objective_model_fixture(name);
  Setup s = set_up(f);
  const nlohmann::json& hp = f.expected.at("adamw");
  AdamWOptions options;
  options.beta1 = hp["betas"][0].get<double>();
  options.beta2 = hp["betas"][1].get<double>();
  options.eps = hp["eps"].get<double>();
  options.weight_decay = hp["weight_decay"].get<double>();
  AdamW adamw(options);
  s.model->params().zero_grads();
  for (const auto& p : s.model->params().all())
    if (p->trainable) adamw.add_slot(p->name, p->value, &p->grad);
  const auto expected = f.expected.at("adamw_losses").get<std::vector<double>>();
  ASSERT_EQ(expected.size(), 4u) << name;
  for (size_t step = 0; step < expected.size(); ++step) {
    const double loss = objective_loss_of(run_step(s, f), name);
    EXPECT_NEAR(loss, expected[step], tolerance(expected[step])) << name << " loss before AdamW step " << step + 1;
    std::printf("[%s] AdamW step %zu: loss %.9g vs %.9g\n", name.c_str(), step, loss, expected[step]);
    if (step + 1 < expected.size()) adamw.step(hp["lr"].get<double>());
  }
}

}  // namespace

TEST(ObjectiveModelFixtures, DpoSigmoidDenseMatchesTransformers) { check_loss_metrics_gradients("dpo_sigmoid_dense"); }
TEST(ObjectiveModelFixtures, DpoIpoMoeMatchesTransformers) { check_loss_metrics_gradients("dpo_ipo_moe"); }
TEST(ObjectiveModelFixtures, RewardDenseMatchesTransformers) { check_loss_metrics_gradients("reward_dense"); }
TEST(ObjectiveModelFixtures, RewardMoeMatchesTransformers) { check_loss_metrics_gradients("reward_moe"); }
TEST(ObjectiveModelFixtures, ValueDenseMatchesTransformers) { check_loss_metrics_gradients("value_dense"); }
TEST(ObjectiveModelFixtures, ValueMoeMatchesTransformers) { check_loss_metrics_gradients("value_moe"); }
TEST(ObjectiveModelFixtures, ActorDenseMatchesTransformers) { check_loss_metrics_gradients("actor_dense"); }
TEST(ObjectiveModelFixtures, ActorMoeMatchesTransformers) { check_loss_metrics_gradients("actor_moe"); }

// The Qwen3-VL toy on multimodal pairs (an image in the prompt of both halves: the vision tower's gradients sum over
// both copies) and rollouts: DPO, a reward head, a value head and the PPO actor.
TEST(ObjectiveModelFixtures, DpoSigmoidVlMatchesTransformers) { check_loss_metrics_gradients("dpo_sigmoid_vl"); }
TEST(ObjectiveModelFixtures, RewardVlMatchesTransformers) { check_loss_metrics_gradients("reward_vl"); }
TEST(ObjectiveModelFixtures, ValueVlMatchesTransformers) { check_loss_metrics_gradients("value_vl"); }
TEST(ObjectiveModelFixtures, ActorVlMatchesTransformers) { check_loss_metrics_gradients("actor_vl"); }

// LoRA (PEFT on the linear modules; the experts' tensors per expert and shared): loss, logits, every adapter's
// gradient, no gradient for the frozen base, and three AdamW steps over the adapters only.
TEST(ObjectiveModelFixtures, LoraSftDenseMatchesTransformersPeft) { check_loss_metrics_gradients("lora_sft_dense"); }
TEST(ObjectiveModelFixtures, LoraSftMoeMatchesTransformersPeft) { check_loss_metrics_gradients("lora_sft_moe"); }
TEST(ObjectiveModelFixtures, LoraSftMoeSharedMatchesTransformersPeft) {
  check_loss_metrics_gradients("lora_sft_moe_shared");
}
TEST(ObjectiveModelFixtures, LoraSftVlMatchesTransformersPeft) { check_loss_metrics_gradients("lora_sft_vl"); }
TEST(ObjectiveModelFixtures, LoraDpoDenseMatchesTransformersPeft) { check_loss_metrics_gradients("lora_dpo_dense"); }

TEST(ObjectiveModelFixtures, DpoSigmoidDenseAdamWStepsMatchTransformers) {
  check_objective_adamw_steps("dpo_sigmoid_dense");
}
TEST(ObjectiveModelFixtures, DpoIpoMoeAdamWStepsMatchTransformers) { check_objective_adamw_steps("dpo_ipo_moe"); }
TEST(ObjectiveModelFixtures, RewardDenseAdamWStepsMatchTransformers) { check_objective_adamw_steps("reward_dense"); }
TEST(ObjectiveModelFixtures, RewardMoeAdamWStepsMatchTransformers) { check_objective_adamw_steps("reward_moe"); }
TEST(ObjectiveModelFixtures, ValueDenseAdamWStepsMatchTransformers) { check_objective_adamw_steps("value_dense"); }
TEST(ObjectiveModelFixtures, ValueMoeAdamWStepsMatchTransformers) { check_objective_adamw_steps("value_moe"); }
TEST(ObjectiveModelFixtures, ActorDenseAdamWStepsMatchTransformers) { check_objective_adamw_steps("actor_dense"); }
TEST(ObjectiveModelFixtures, ActorMoeAdamWStepsMatchTransformers) { check_objective_adamw_steps("actor_moe"); }
TEST(ObjectiveModelFixtures, DpoSigmoidVlAdamWStepsMatchTransformers) { check_objective_adamw_steps("dpo_sigmoid_vl"); }
TEST(ObjectiveModelFixtures, RewardVlAdamWStepsMatchTransformers) { check_objective_adamw_steps("reward_vl"); }
TEST(ObjectiveModelFixtures, ValueVlAdamWStepsMatchTransformers) { check_objective_adamw_steps("value_vl"); }
TEST(ObjectiveModelFixtures, ActorVlAdamWStepsMatchTransformers) { check_objective_adamw_steps("actor_vl"); }
TEST(ObjectiveModelFixtures, LoraSftDenseAdamWStepsMatchTransformersPeft) {
  check_objective_adamw_steps("lora_sft_dense");
}
TEST(ObjectiveModelFixtures, LoraSftMoeAdamWStepsMatchTransformersPeft) { check_objective_adamw_steps("lora_sft_moe"); }
TEST(ObjectiveModelFixtures, LoraSftMoeSharedAdamWStepsMatchTransformersPeft) {
  check_objective_adamw_steps("lora_sft_moe_shared");
}
TEST(ObjectiveModelFixtures, LoraSftVlAdamWStepsMatchTransformersPeft) { check_objective_adamw_steps("lora_sft_vl"); }
TEST(ObjectiveModelFixtures, LoraDpoDenseAdamWStepsMatchTransformersPeft) {
  check_objective_adamw_steps("lora_dpo_dense");
}
