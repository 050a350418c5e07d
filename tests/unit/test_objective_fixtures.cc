// The objectives' losses, metrics and gradients against tests/fixtures/objective/objective_losses.json, written by
// scripts/gen_objective_loss_fixtures.py (torch autograd over the reference implementations' formulas), at 1e-6
// relative.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "objective/objective_config.h"
#include "objective/preference_losses.h"
#include "objective/token_losses.h"

using namespace veomni;
using namespace veomni::objective;
using nlohmann::json;

namespace {

constexpr double kObjectiveRelTol = 1e-6;
constexpr double kAbsTol = 1e-12;  // gradients that are zero in one reference may be 1e-17 in the other

const std::string kFixture = std::string(VEOMNI_FIXTURES_DIR) + "/objective/objective_losses.json";

json load_fixture() {
  std::ifstream in(kFixture);
  if (!in) {
    ADD_FAILURE() << kFixture << " is missing: generate it with python3 scripts/gen_objective_loss_fixtures.py "
                  << "(torch) and commit it";
    return json::object();
  }
  return json::parse(in);
}

std::vector<double> doubles(const json& v) { return v.get<std::vector<double>>(); }
std::vector<uint8_t> mask_bytes_of(const json& v) { return v.get<std::vector<uint8_t>>(); }

::testing::AssertionResult close(double got, double want) {
  if (std::fabs(got - want) <= kAbsTol + kObjectiveRelTol * std::fabs(want)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", want " << want << " (relative error "
                                       << std::fabs(got - want) / std::max(std::fabs(want), 1e-300) << ")";
}

void expect_values(const std::vector<double>& got, const json& want, const std::string& what) {
  const std::vector<double> w = doubles(want);
  ASSERT_EQ(got.size(), w.size()) << what;
  for (size_t i = 0; i < w.size(); ++i) EXPECT_TRUE(close(got[i], w[i])) << what << "[" << i << "]";
}

void expect_result(const json& c, double loss, const Metrics& metrics) {
  EXPECT_TRUE(close(loss, c.at("loss").get<double>())) << "loss";
  EXPECT_EQ(metrics.size(), c.at("metrics").size()) << "metric names";
  for (const auto& [name, want] : c.at("metrics").items()) {
    const auto it = metrics.find(name);
    if (it == metrics.end()) {
      ADD_FAILURE() << "metric " << name << " missing";
      continue;
    }
    EXPECT_TRUE(close(it->second, want.get<double>())) << "metric " << name;
  }
}

void check_dpo(const json& c) {
  const json& cfg = c.at("config");
  DpoConfig config;
  config.beta = cfg.at("beta").get<double>();
  config.label_smoothing = cfg.at("label_smoothing").get<double>();
  config.loss_type = cfg.at("loss_type").get<std::string>();
  config.reference_free = cfg.at("reference_free").get<bool>();
  config.validate();
  const json& x = c.at("inputs");
  const auto chosen = doubles(x.at("chosen_logps")), rejected = doubles(x.at("rejected_logps"));
  const auto ref_chosen = doubles(x.at("ref_chosen_logps")), ref_rejected = doubles(x.at("ref_rejected_logps"));
  const DpoResult out =
      dpo_loss(config, {chosen, rejected, ref_chosen, ref_rejected}, c.at("global_pairs").get<int64_t>());
  expect_result(c, out.loss, out.metrics);
  expect_values(out.dchosen_logps, c.at("grads").at("chosen_logps"), "dchosen_logps");
  expect_values(out.drejected_logps, c.at("grads").at("rejected_logps"), "drejected_logps");
}

void check_reward(const json& c) {
  const json& x = c.at("inputs");
  const auto chosen = doubles(x.at("chosen_rewards")), rejected = doubles(x.at("rejected_rewards"));
  const RewardResult out = bradley_terry_loss({chosen, rejected}, c.at("global_pairs").get<int64_t>());
  expect_result(c, out.loss, out.metrics);
  expect_values(out.dchosen_rewards, c.at("grads").at("chosen_rewards"), "dchosen_rewards");
  expect_values(out.drejected_rewards, c.at("grads").at("rejected_rewards"), "drejected_rewards");
}

void check_value(const json& c) {
  ValueConfig config;
  config.cliprange_value = c.at("config").at("cliprange_value").get<double>();
  config.validate();
  const json& x = c.at("inputs");
  const auto values = doubles(x.at("values")), returns = doubles(x.at("returns"));
  const auto old_values = doubles(x.at("old_values"));
  const auto mask = mask_bytes_of(x.at("mask"));
  const ValueResult out = value_loss(config, {values, returns, old_values, mask}, c.at("global_tokens").get<int64_t>());
  expect_result(c, out.loss, out.metrics);
  expect_values(out.dvalues, c.at("grads").at("values"), "dvalues");
}

void check_actor(const json& c) {
  const json& cfg = c.at("config");
  PpoActorConfig config;
  config.clip_ratio = cfg.at("clip_ratio").get<double>();
  if (cfg.contains("clip_ratio_low")) config.clip_ratio_low = cfg.at("clip_ratio_low").get<double>();
  if (cfg.contains("clip_ratio_high")) config.clip_ratio_high = cfg.at("clip_ratio_high").get<double>();
  config.clip_ratio_c = cfg.at("clip_ratio_c").get<double>();
  config.entropy_coeff = cfg.at("entropy_coeff").get<double>();
  config.use_kl_loss = cfg.at("use_kl_loss").get<bool>();
  config.kl_loss_coef = cfg.at("kl_loss_coef").get<double>();
  config.kl_loss_type = cfg.at("kl_loss_type").get<std::string>();
  config.validate();
  const json& x = c.at("inputs");
  const auto lp = doubles(x.at("log_probs")), old = doubles(x.at("old_log_probs"));
  const auto adv = doubles(x.at("advantages")), ref = doubles(x.at("ref_log_probs"));
  const auto ent = doubles(x.at("entropy"));
  const auto mask = mask_bytes_of(x.at("mask"));
  const ActorResult out = ppo_actor_loss(config, {lp, old, adv, ref, ent, mask}, c.at("global_tokens").get<int64_t>());
  expect_result(c, out.loss, out.metrics);
  expect_values(out.dlog_probs, c.at("grads").at("log_probs"), "dlog_probs");
  expect_values(out.dentropy, c.at("grads").at("entropy"), "dentropy");
}

}  // namespace

TEST(ObjectiveFixtures, LossesMetricsAndGradientsMatchTheReference) {
  const json doc = load_fixture();
  if (doc.empty()) return;
  SCOPED_TRACE(doc.value("producer", "unknown producer"));
  int seen = 0;
  std::vector<std::string> objectives;
  for (const json& c : doc.at("cases")) {
    const std::string objective = c.at("objective").get<std::string>();
    SCOPED_TRACE(objective + " " + c.at("name").get<std::string>());
    if (objective == "dpo")
      check_dpo(c);
    else if (objective == "reward")
      check_reward(c);
    else if (objective == "value")
      check_value(c);
    else if (objective == "ppo_actor")
      check_actor(c);
    else
      ADD_FAILURE() << "unknown objective " << objective;
    if (std::find(objectives.begin(), objectives.end(), objective) == objectives.end()) objectives.push_back(objective);
    ++seen;
  }
  EXPECT_GE(seen, 4);
  EXPECT_EQ(objectives.size(), 4u) << "every objective has a case";
}
