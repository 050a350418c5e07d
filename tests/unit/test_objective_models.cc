// The objectives beyond SFT on a tiny model, through the real collator: DPO against a reference copy starts at
// log 2 with zero rewards; every objective's parameter gradients match finite differences of its reported loss;
// pairs are counted once per SP group; missing rollout values are input errors naming the key.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "data/collator.h"
#include "test_model_util.h"
#include "test_ops_util.h"
#include "tests/common/expect_error.h"
#include "train/objective.h"
#include "train/train_model.h"

using namespace veomni;

namespace {

std::vector<int64_t> random_ids(Rng& rng, int64_t n, int64_t vocab) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(vocab))));
  return ids;
}

// A pair: chosen of length c then rejected of length r; the first two tokens of each half are the prompt.
TokenSample random_pair_sample(Rng& rng, int64_t c, int64_t r, int64_t vocab) {
  TokenSample s;
  std::vector<int64_t> ids = random_ids(rng, c + r, vocab), labels = ids, positions;
  for (int64_t i = 0; i < c + r; ++i) positions.push_back(i < c ? i : i - c);
  for (int64_t i : {int64_t{0}, int64_t{1}, c, c + 1}) labels[static_cast<size_t>(i)] = kIgnoreIndex;
  s.input_ids = Tensor::from_vector(ids, {c + r});
  s.labels = Tensor::from_vector(labels, {c + r});
  s.position_ids = Tensor::from_vector(positions, {c + r});
  s.chosen_length = c;
  s.context = "pair";
  return s;
}

// A rollout sample of length n with a 3-token prompt and per-token values of the given keys.
TokenSample random_rollout_sample(Rng& rng, int64_t n, int64_t vocab, const std::vector<std::string>& keys) {
  TokenSample s;
  std::vector<int64_t> ids = random_ids(rng, n, vocab), labels = ids;
  for (int64_t i = 0; i < 3; ++i) labels[static_cast<size_t>(i)] = kIgnoreIndex;
  s.input_ids = Tensor::from_vector(ids, {n});
  s.labels = Tensor::from_vector(labels, {n});
  s.context = "rollout";
  for (const std::string& key : keys) {
    std::vector<float> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<float>(rng.uniform() * 2.0 - 1.0));
    // Old and reference log-probs near the tiny model's own (about -log vocab), so that the ratio stays inside
    // the clip range and the finite differences see a smooth loss.
    if (key == "old_log_probs" || key == "ref_log_probs")
      for (float& x : v) x = -std::log(50.0f) + 0.02f * x;
    s.token_values[key] = Tensor::from_vector(v, {n});
  }
  return s;
}

MultimodalBatch collate_objective(const std::vector<TokenSample>& samples, int64_t vocab) {
  CollateOptions options;
  options.max_seq_len = 64;
  options.vocab_size = vocab;
  MultimodalBatch batch;
  batch.text = slice_for_sp_rank(pack_samples(samples, options), 1, 0);
  return batch;
}

struct ObjectiveRun {
  ObjectiveMetrics metrics;
  StepLossScale scale;
};

ObjectiveRun run_objective(Objective& objective, TrainModel& model, const MultimodalBatch& batch) {
  ObjectiveRun run;
  run.scale = objective.step_scale(objective.normaliser(batch, true), 1);
  std::vector<double> sums(objective.num_sums(), 0.0);
  model.params().zero_grads();
  objective.micro_batch(model, batch, run.scale, true, sums);
  run.metrics = objective.step_metrics(sums, run.scale);
  return run;
}

double objective_metric(const ObjectiveMetrics& metrics, const std::string& name) {
  for (const auto& [k, v] : metrics)
    if (k == name) return v;
  ADD_FAILURE() << "no metric " << name;
  return NAN;
}

// The gradient of the reported loss along a random direction over all parameters, against central differences:
// sum_p <grad_p, v_p> = (L(theta + eps v) - L(theta - eps v)) / (2 eps). One direction through every parameter keeps
// the difference well above float32 rounding, where per-entry differences of tiny gradients would drown in it.
void expect_directional_derivative(Objective& objective, TrainModel& model, const MultimodalBatch& batch) {
  run_objective(objective, model, batch);
  Rng rng(99);
  double analytic = 0.0;
  std::vector<std::vector<float>> direction;
  for (const auto& p : model.params().all()) {
    const std::vector<float> g = p->grad.to_float_vector();
    std::vector<float> v(g.size());
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = static_cast<float>(rng.uniform() * 2.0 - 1.0);
      analytic += static_cast<double>(g[i]) * v[i];
    }
    direction.push_back(std::move(v));
  }
  auto shift = [&](float eps) {
    size_t k = 0;
    for (const auto& p : model.params().all()) {
      float* x = p->value.data<float>();
      for (size_t i = 0; i < direction[k].size(); ++i) x[i] += eps * direction[k][i];
      ++k;
    }
  };
  constexpr float kEps = 2e-4f;
  shift(kEps);
  const double up = run_objective(objective, model, batch).metrics.front().second;
  shift(-2 * kEps);
  const double down = run_objective(objective, model, batch).metrics.front().second;
  shift(kEps);
  const double numeric = (up - down) / (2.0 * kEps);
  EXPECT_NEAR(analytic, numeric, 2e-3 * std::fabs(numeric) + 1e-5) << "analytic " << analytic << " numeric " << numeric;
}

ModelConfig config_of(bool moe) { return moe ? test::tiny_moe_config(false) : test::tiny_dense_config(false); }

std::vector<TokenSample> pairs(const ModelConfig& config) {
  Rng rng(11);
  return {random_pair_sample(rng, 7, 5, config.vocab_size), random_pair_sample(rng, 4, 9, config.vocab_size)};
}

TEST(DpoObjective, AgainstAReferenceCopyStartsAtLog2WithZeroRewards) {
  const ModelConfig config = config_of(false);
  TrainModel policy(config, ModelOptions{}), reference(config, ModelOptions{});
  policy.init_weights(3);
  reference.init_weights(3);
  ObjectiveSettings settings;
  settings.name = "dpo";
  std::unique_ptr<Objective> dpo = make_objective(settings, config, &reference);
  const ObjectiveRun run = run_objective(*dpo, policy, collate_objective(pairs(config), config.vocab_size));
  EXPECT_NEAR(objective_metric(run.metrics, "loss"), std::log(2.0), 1e-6);
  EXPECT_NEAR(objective_metric(run.metrics, "dpo_loss"), std::log(2.0), 1e-6);
  EXPECT_NEAR(objective_metric(run.metrics, "chosen_rewards"), 0.0, 1e-6);
  EXPECT_NEAR(objective_metric(run.metrics, "reward_margin"), 0.0, 1e-6);
  EXPECT_EQ(run.scale.global_pairs, 2);
  // The reference stays frozen: no gradient reaches it.
  for (const auto& p : reference.params().all()) EXPECT_FALSE(p->grad.defined()) << p->name;
}

// Dense and MoE alike (a step this small moves no token to another expert on this batch).
TEST(DpoObjective, GradientsMatchFiniteDifferences) {
  for (bool moe : {false, true}) {
    SCOPED_TRACE(moe ? "moe" : "dense");
    const ModelConfig config = config_of(moe);
    TrainModel policy(config, ModelOptions{}), reference(config, ModelOptions{});
    policy.init_weights(3);
    reference.init_weights(4);  // a different reference, so that the loss is away from its symmetric point
    ObjectiveSettings settings;
    settings.name = "dpo";
    settings.dpo.label_smoothing = 0.1;
    std::unique_ptr<Objective> dpo = make_objective(settings, config, &reference);
    expect_directional_derivative(*dpo, policy, collate_objective(pairs(config), config.vocab_size));
  }
}

TEST(RewardObjective, GradientsMatchFiniteDifferences) {
  for (bool moe : {false, true}) {
    SCOPED_TRACE(moe ? "moe" : "dense");
    const ModelConfig config = config_of(moe);
    TrainModel model(config, ModelOptions{}, ModelHead::SequenceReward);
    model.init_weights(5);
    ObjectiveSettings settings;
    settings.name = "reward";
    std::unique_ptr<Objective> reward = make_objective(settings, config);
    expect_directional_derivative(*reward, model, collate_objective(pairs(config), config.vocab_size));
  }
}

TEST(ValueObjective, GradientsMatchFiniteDifferences) {
  const ModelConfig config = config_of(false);
  TrainModel model(config, ModelOptions{}, ModelHead::TokenValue);
  model.init_weights(6);
  ObjectiveSettings settings;
  settings.name = "value";
  settings.critic.cliprange_value = 5.0;  // no clipping kink near the start values
  std::unique_ptr<Objective> value = make_objective(settings, config);
  Rng rng(2);
  const std::vector<TokenSample> samples{random_rollout_sample(rng, 9, config.vocab_size, {"returns", "old_values"}),
                                         random_rollout_sample(rng, 6, config.vocab_size, {"returns", "old_values"})};
  expect_directional_derivative(*value, model, collate_objective(samples, config.vocab_size));
}

TEST(PpoActorObjective, GradientsMatchFiniteDifferences) {
  for (bool moe : {false, true}) {
    SCOPED_TRACE(moe ? "moe" : "dense");
    const ModelConfig config = config_of(moe);
    TrainModel model(config, ModelOptions{});
    model.init_weights(7);
    ObjectiveSettings settings;
    settings.name = "ppo_actor";
    settings.actor.entropy_coeff = 0.5;
    settings.actor.use_kl_loss = true;
    settings.actor.kl_loss_coef = 0.1;
    std::unique_ptr<Objective> actor = make_objective(settings, config);
    Rng rng(8);
    const std::vector<std::string> keys{"old_log_probs", "advantages", "ref_log_probs"};
    const std::vector<TokenSample> samples{random_rollout_sample(rng, 9, config.vocab_size, keys),
                                           random_rollout_sample(rng, 7, config.vocab_size, keys)};
    const MultimodalBatch batch = collate_objective(samples, config.vocab_size);
    const ObjectiveRun run = run_objective(*actor, model, batch);
    EXPECT_EQ(objective_metric(run.metrics, "pg_clipfrac"), 0.0);  // the ratio stays inside the clip range
    EXPECT_GT(objective_metric(run.metrics, "entropy"), 3.0);      // near log(50) for a model at init
    expect_directional_derivative(*actor, model, batch);
  }
}

TEST(PreferenceObjectives, CountPairsOncePerSequenceParallelGroup) {
  const ModelConfig config = config_of(false);
  ObjectiveSettings settings;
  settings.name = "reward";
  std::unique_ptr<Objective> reward = make_objective(settings, config);
  const MultimodalBatch batch = collate_objective(pairs(config), config.vocab_size);
  EXPECT_EQ(reward->normaliser(batch, true), 2);
  EXPECT_EQ(reward->normaliser(batch, false), 0);
}

TEST(RolloutObjectives, MissingRolloutValuesAreInputErrorsNamingTheKey) {
  const ModelConfig config = config_of(false);
  Rng rng(1);
  const MultimodalBatch batch =
      collate_objective({random_rollout_sample(rng, 8, config.vocab_size, {"returns"})}, config.vocab_size);
  for (const char* name : {"value", "ppo_actor"}) {
    TrainModel model(config, ModelOptions{}, model_head_for_objective(name));
    model.init_weights(1);
    ObjectiveSettings settings;
    settings.name = name;
    std::unique_ptr<Objective> objective = make_objective(settings, config);
    std::vector<double> sums(objective->num_sums(), 0.0);
    const std::string message = veomni::testing::input_error_of(
        [&] { objective->micro_batch(model, batch, objective->step_scale(5, 1), true, sums); });
    EXPECT_NE(message.find(name == std::string("value") ? "'old_values'" : "'old_log_probs'"), std::string::npos)
        << message;
  }
}

}  // namespace

// Validation runs the training pass's forward only: the same sums, and no parameter gets a gradient.
TEST(Objectives, EvaluateAddsTheTrainingPassSumsWithoutGradients) {
  const ModelConfig config = config_of(true);
  Rng rng(21);
  const std::vector<std::string> actor_keys{"old_log_probs", "advantages"};
  const std::vector<std::string> value_keys{"returns", "old_values"};
  struct Case {
    std::string name;
    ModelHead head;
    std::vector<TokenSample> samples;
  };
  const std::vector<Case> cases{
      {"sft", ModelHead::LanguageModel, {random_rollout_sample(rng, 9, config.vocab_size, {})}},
      {"dpo", ModelHead::LanguageModel, pairs(config)},
      {"reward", ModelHead::SequenceReward, pairs(config)},
      {"value", ModelHead::TokenValue, {random_rollout_sample(rng, 8, config.vocab_size, value_keys)}},
      {"ppo_actor", ModelHead::LanguageModel, {random_rollout_sample(rng, 8, config.vocab_size, actor_keys)}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TrainModel model(config, ModelOptions{}, c.head), reference(config, ModelOptions{});
    model.init_weights(5);
    reference.init_weights(6);
    ObjectiveSettings settings;
    settings.name = c.name;
    std::unique_ptr<Objective> objective = make_objective(settings, config, &reference);
    const MultimodalBatch batch = collate_objective(c.samples, config.vocab_size);
    const StepLossScale scale = objective->step_scale(objective->normaliser(batch, true), 1);

    std::vector<double> trained(objective->num_sums(), 0.0), evaluated(objective->num_sums(), 0.0);
    model.params().zero_grads();
    objective->micro_batch(model, batch, scale, true, trained);
    model.params().zero_grads();
    objective->evaluate(model, batch, scale, true, evaluated);
    EXPECT_EQ(evaluated, trained);
    for (const auto& p : model.params().all())
      for (float g : p->grad.to_float_vector()) ASSERT_EQ(g, 0.0f) << p->name;
    EXPECT_EQ(objective->step_metrics(evaluated, scale).front().first, "loss");
  }
}
