// Tests of the objectives' loss functions (DPO, Bradley-Terry, clipped value loss, PPO actor): hand-computed values,
// gradients against finite differences, the edge cases of each (reference_free, label_smoothing, ipo, all-clipped
// tokens, zero advantages), layout invariance of the global normalisation, and config validation naming the key.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "objective/objective_config.h"
#include "objective/preference_losses.h"
#include "objective/token_losses.h"

using namespace veomni;
using namespace veomni::objective;

namespace {

using Doubles = std::vector<double>;

// Central differences of loss(x) with respect to every element of x, against the analytic gradient.
void expect_gradient(const char* what, Doubles& x, const Doubles& grad, const std::function<double()>& loss) {
  ASSERT_EQ(x.size(), grad.size()) << what;
  for (size_t i = 0; i < x.size(); ++i) {
    const double orig = x[i], h = 1e-6 * std::max(1.0, std::fabs(orig));
    x[i] = orig + h;
    const double up = loss();
    x[i] = orig - h;
    const double down = loss();
    x[i] = orig;
    const double fd = (up - down) / (2 * h);
    EXPECT_NEAR(fd, grad[i], 1e-7 + 1e-6 * std::fabs(grad[i])) << what << " element " << i;
  }
}

void expect_loss_input_error_naming(const std::function<void()>& fn, const std::string& key) {
  try {
    fn();
    ADD_FAILURE() << "no InputError for " << key;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

// Four pairs of log-prob sums (policy and reference) with the policy preferring chosen in three.
struct DpoData {
  Doubles chosen{-10.0, -23.5, -7.25, -31.0}, rejected{-14.0, -20.0, -9.5, -30.0};
  Doubles ref_chosen{-11.0, -22.0, -8.0, -30.5}, ref_rejected{-13.0, -21.5, -9.0, -29.0};
  DpoInputs inputs(size_t begin = 0, size_t end = 4) const {
    auto part = [&](const Doubles& v) { return std::span<const double>(v).subspan(begin, end - begin); };
    return {part(chosen), part(rejected), part(ref_chosen), part(ref_rejected)};
  }
};

}  // namespace

TEST(ObjectiveDpo, SigmoidLossRewardsAndGradientByHand) {
  const DpoConfig config;  // beta 0.1, sigmoid
  const Doubles c{-10.0}, r{-14.0}, rc{-11.0}, rr{-13.0};
  // z = (-10 + 14) - (-11 + 13) = 2; loss = -log sigmoid(0.2); d/dz = -0.1 sigmoid(-0.2). Two pairs globally.
  const DpoResult out = dpo_loss(config, {c, r, rc, rr}, 2);
  EXPECT_NEAR(out.loss, 0.5981388693815918 / 2, 1e-15);
  EXPECT_NEAR(out.dchosen_logps[0], -0.04501660026875222 / 2, 1e-15);
  EXPECT_NEAR(out.drejected_logps[0], 0.04501660026875222 / 2, 1e-15);
  EXPECT_DOUBLE_EQ(out.metrics.at("dpo_loss"), out.loss);
  EXPECT_NEAR(out.metrics.at("chosen_rewards"), 0.1 / 2, 1e-15);
  EXPECT_NEAR(out.metrics.at("rejected_rewards"), -0.1 / 2, 1e-15);
  EXPECT_NEAR(out.metrics.at("reward_margin"), 0.2 / 2, 1e-15);
  EXPECT_DOUBLE_EQ(out.metrics.at("reward_accuracy"), 0.5);
  EXPECT_EQ(out.metrics.size(), 5u);
}

TEST(ObjectiveDpo, LabelSmoothingAndIpoByHand) {
  const Doubles c{-10.0}, r{-14.0}, rc{-11.0}, rr{-13.0};  // z = 2
  DpoConfig smooth;
  smooth.label_smoothing = 0.25;  // -(0.75) log sigmoid(0.2) - 0.25 log sigmoid(-0.2)
  const DpoResult s = dpo_loss(smooth, {c, r, rc, rr}, 1);
  EXPECT_NEAR(s.loss, 0.6481388693815918, 1e-15);
  EXPECT_NEAR(s.dchosen_logps[0], -0.020016600268752217, 1e-15);
  DpoConfig ipo;
  ipo.loss_type = "ipo";
  ipo.beta = 0.5;  // (z - 1 / (2 beta))^2 = (2 - 1)^2; d/dz = 2 (z - 1)
  const DpoResult i = dpo_loss(ipo, {c, r, rc, rr}, 1);
  EXPECT_DOUBLE_EQ(i.loss, 1.0);
  EXPECT_DOUBLE_EQ(i.dchosen_logps[0], 2.0);
  EXPECT_DOUBLE_EQ(i.drejected_logps[0], -2.0);
  EXPECT_DOUBLE_EQ(i.metrics.at("chosen_rewards"), 0.5);  // beta (chosen - ref_chosen)
}

TEST(ObjectiveDpo, ReferenceFreeIgnoresTheReferenceInTheLossOnly) {
  DpoConfig config;
  config.reference_free = true;
  const Doubles c{-10.0}, r{-14.0}, rc{-11.0}, rr{-13.0}, zeros{0.0};
  const DpoResult out = dpo_loss(config, {c, r, rc, rr}, 1);
  const DpoResult no_ref = dpo_loss(config, {c, r, zeros, zeros}, 1);
  // z = -10 + 14 = 4: the reference log-ratio (2) is left out.
  EXPECT_NEAR(out.loss, std::log1p(std::exp(-0.4)), 1e-15);
  EXPECT_DOUBLE_EQ(out.loss, no_ref.loss);
  EXPECT_DOUBLE_EQ(out.dchosen_logps[0], no_ref.dchosen_logps[0]);
  // The rewards use the reference passed (VeOmni's behaviour); with none, beta times the policy's log-probs.
  EXPECT_NEAR(out.metrics.at("chosen_rewards"), 0.1, 1e-15);
  EXPECT_NEAR(no_ref.metrics.at("chosen_rewards"), -1.0, 1e-15);
}

TEST(ObjectiveDpo, GradientsMatchFiniteDifferences) {
  for (const auto& [loss_type, ls, free] : {std::tuple<std::string, double, bool>{"sigmoid", 0.0, false},
                                            {"sigmoid", 0.1, false},
                                            {"ipo", 0.0, false},
                                            {"sigmoid", 0.0, true},
                                            {"ipo", 0.0, true}}) {
    SCOPED_TRACE(loss_type + (free ? " reference_free" : "") + " ls " + std::to_string(ls));
    DpoConfig config;
    config.loss_type = loss_type;
    config.label_smoothing = ls;
    config.reference_free = free;
    config.beta = 0.3;
    DpoData d;
    const DpoResult out = dpo_loss(config, d.inputs(), 6);
    auto loss = [&] { return dpo_loss(config, d.inputs(), 6).loss; };
    expect_gradient("dchosen_logps", d.chosen, out.dchosen_logps, loss);
    expect_gradient("drejected_logps", d.rejected, out.drejected_logps, loss);
  }
}

TEST(ObjectiveDpo, MicroBatchSumsEqualTheWholeBatch) {
  const DpoConfig config;
  const DpoData d;
  const DpoResult whole = dpo_loss(config, d.inputs(), 4);
  const DpoResult a = dpo_loss(config, d.inputs(0, 1), 4), b = dpo_loss(config, d.inputs(1, 4), 4);
  EXPECT_NEAR(a.loss + b.loss, whole.loss, 1e-15);
  for (const auto& [name, value] : whole.metrics)
    EXPECT_NEAR(a.metrics.at(name) + b.metrics.at(name), value, 1e-14) << name;
  EXPECT_DOUBLE_EQ(b.dchosen_logps[2], whole.dchosen_logps[3]);
  EXPECT_DOUBLE_EQ(whole.metrics.at("reward_accuracy"), 0.75);  // pairs 0, 2 and 3 prefer chosen by their rewards
}

TEST(ObjectiveDpo, ConfigValidationNamesTheKey) {
  EXPECT_NO_THROW(DpoConfig{}.validate());
  auto with = [](auto edit) {
    DpoConfig c;
    edit(c);
    return [c] { c.validate(); };
  };
  expect_loss_input_error_naming(with([](DpoConfig& c) { c.beta = 0.0; }), "dpo_config.beta");
  expect_loss_input_error_naming(with([](DpoConfig& c) { c.beta = NAN; }), "dpo_config.beta");
  expect_loss_input_error_naming(with([](DpoConfig& c) { c.label_smoothing = 0.6; }), "dpo_config.label_smoothing");
  expect_loss_input_error_naming(with([](DpoConfig& c) { c.loss_type = "hinge"; }), "dpo_config.loss_type");
  expect_loss_input_error_naming(with([](DpoConfig& c) {
                              c.loss_type = "ipo";
                              c.label_smoothing = 0.1;
                            }),
                            "dpo_config.label_smoothing");
  expect_loss_input_error_naming(with([](DpoConfig& c) { c.refer_model_precision = "fp16"; }),
                            "dpo_config.refer_model_precision");
  DpoConfig c;
  c.beta = -1.0;
  expect_loss_input_error_naming([&] { c.validate("train.dpo_config"); }, "train.dpo_config.beta");
}

TEST(ObjectiveReward, BradleyTerryByHandAndFiniteDifferences) {
  const Doubles c{1.5, -0.25, 2.0}, r{0.5, 0.75, 2.0};
  const RewardResult out = bradley_terry_loss({c, r}, 4);
  // Pair 0: margin 1: -log sigmoid(1), d/dmargin = -sigmoid(-1).
  EXPECT_NEAR(out.dchosen_rewards[0], -0.2689414213699951 / 4, 1e-15);
  EXPECT_NEAR(out.drejected_rewards[0], 0.2689414213699951 / 4, 1e-15);
  const double want = (0.31326168751822286 + std::log1p(std::exp(1.0)) + std::log(2.0)) / 4;
  EXPECT_NEAR(out.loss, want, 1e-15);
  EXPECT_DOUBLE_EQ(out.metrics.at("rm_loss"), out.loss);
  EXPECT_DOUBLE_EQ(out.metrics.at("reward_accuracy"), 0.25);  // a tie is not a win
  EXPECT_NEAR(out.metrics.at("chosen_reward"), 3.25 / 4, 1e-15);
  EXPECT_NEAR(out.metrics.at("rejected_reward"), 3.25 / 4, 1e-15);
  Doubles cc = c, rr = r;
  auto loss = [&] { return bradley_terry_loss({cc, rr}, 4).loss; };
  expect_gradient("dchosen_rewards", cc, out.dchosen_rewards, loss);
  expect_gradient("drejected_rewards", rr, out.drejected_rewards, loss);
}

TEST(ObjectiveValue, ClippedValueLossByHand) {
  ValueConfig config;
  config.cliprange_value = 0.2;
  // Token 0: unclipped loss larger (1 > 0.49): gradient (v - R). Token 1: inside the clip range (a tie, split evenly,
  // summing to the full gradient). Token 2: the clipped loss is larger (1.69 > 1): no gradient, counted as clipped.
  // Token 3: masked.
  const Doubles v{1.0, 0.6, 1.0, 9.0}, old{0.5, 0.5, 0.5, 0.0}, ret{0.0, 1.5, 2.0, -9.0};
  const std::vector<uint8_t> mask{1, 1, 1, 0};
  const ValueResult out = value_loss(config, {v, ret, old, mask}, 5);
  EXPECT_NEAR(out.loss, 0.5 * (1.0 + 0.81 + 1.69) / 5, 1e-15);
  EXPECT_NEAR(out.dvalues[0], 1.0 / 5, 1e-15);
  EXPECT_NEAR(out.dvalues[1], -0.9 / 5, 1e-15);
  EXPECT_EQ(out.dvalues[2], 0.0);
  EXPECT_EQ(out.dvalues[3], 0.0);
  EXPECT_DOUBLE_EQ(out.metrics.at("vf_loss"), out.loss);
  EXPECT_DOUBLE_EQ(out.metrics.at("vf_clipfrac"), 1.0 / 5);
}

TEST(ObjectiveValue, GradientMatchesFiniteDifferencesAndMicroBatchesSum) {
  ValueConfig config;
  Doubles v{0.3, -1.2, 2.5, 0.05, 1.0, -0.4};
  const Doubles old{0.1, -0.2, 1.5, 0.0, 0.9, 0.4}, ret{1.0, -2.0, 0.5, 0.2, 3.0, 0.0};
  const std::vector<uint8_t> mask{1, 1, 1, 1, 0, 1};
  const ValueResult out = value_loss(config, {v, ret, old, mask}, 5);
  expect_gradient("dvalues", v, out.dvalues, [&] { return value_loss(config, {v, ret, old, mask}, 5).loss; });
  auto part = [&](size_t b, size_t e) {
    auto s = [&](const Doubles& x) { return std::span<const double>(x).subspan(b, e - b); };
    return value_loss(config, {s(v), s(ret), s(old), std::span<const uint8_t>(mask).subspan(b, e - b)}, 5);
  };
  const ValueResult a = part(0, 2), b = part(2, 6);
  EXPECT_NEAR(a.loss + b.loss, out.loss, 1e-15);
  EXPECT_NEAR(a.metrics.at("vf_clipfrac") + b.metrics.at("vf_clipfrac"), out.metrics.at("vf_clipfrac"), 1e-15);
  expect_loss_input_error_naming([] { ValueConfig{.cliprange_value = 0.0}.validate(); }, "critic.cliprange_value");
  expect_loss_input_error_naming([] { ValueConfig{.loss_agg_mode = "seq-mean-token-sum"}.validate(); },
                            "critic.loss_agg_mode");
}

namespace {

// Four response tokens and a masked one: in the clip range (A > 0), clipped above (A > 0), clipped below (A < 0), and
// beyond the dual-clip bound (A < 0).
struct ActorData {
  Doubles lp{-1.0, -0.5, -2.0, -0.1, -3.0}, old{-1.1, -1.0, -0.5, -1.5, -0.2}, adv{2.0, 1.0, -1.0, -0.5, 4.0};
  Doubles ref{-1.5, -0.4, -2.5, -0.2, -1.0}, ent{1.25, 0.5, 2.0, 0.75, 3.0};
  std::vector<uint8_t> mask{1, 1, 1, 1, 0};
  ActorInputs inputs(bool with_entropy = true) const {
    return {lp, old, adv, ref, with_entropy ? std::span<const double>(ent) : std::span<const double>{}, mask};
  }
};

}  // namespace

TEST(ObjectivePpoActor, ClippedSurrogateByHand) {
  const PpoActorConfig config;  // clip 0.2, dual clip 3, no entropy bonus, no KL loss
  const ActorData d;
  const ActorResult out = ppo_actor_loss(config, d.inputs(), 5);
  const double t0 = -2.0 * std::exp(0.1), t1 = -1.2, t2 = 0.8, t3 = 1.5;
  EXPECT_NEAR(out.loss, (t0 + t1 + t2 + t3) / 5, 1e-15);
  EXPECT_NEAR(out.metrics.at("pg_loss"), out.loss, 1e-15);
  EXPECT_NEAR(out.dlog_probs[0], t0 / 5, 1e-15);  // d(-A ratio)/dlp = -A ratio
  for (size_t i = 1; i < 5; ++i) EXPECT_EQ(out.dlog_probs[i], 0.0) << i;
  EXPECT_DOUBLE_EQ(out.metrics.at("pg_clipfrac"), 2.0 / 5);
  EXPECT_DOUBLE_EQ(out.metrics.at("pg_clipfrac_lower"), 1.0 / 5);
  EXPECT_NEAR(out.metrics.at("ppo_kl"), (-0.1 - 0.5 + 1.5 - 1.4) / 5, 1e-15);
  EXPECT_NEAR(out.metrics.at("entropy"), 4.5 / 5, 1e-15);
  EXPECT_EQ(out.metrics.count("kl_loss"), 0u);
  ASSERT_EQ(out.dentropy.size(), 5u);
  EXPECT_EQ(out.dentropy[0], 0.0);
}

TEST(ObjectivePpoActor, EntropyBonusAndKlLossByHand) {
  PpoActorConfig config;
  config.entropy_coeff = 0.01;
  config.use_kl_loss = true;
  config.kl_loss_coef = 0.1;
  config.kl_loss_type = "low_var_kl";
  ActorData d;
  d.adv = {0.0, 0.0, 0.0, 0.0, 0.0};  // zero advantages: only the entropy and KL terms remain
  d.lp = {-1.0, -1.0, -1.0, -1.0, -1.0};
  d.ref = {-1.5, -1.5, -1.5, -1.5, -1.5};
  const ActorResult out = ppo_actor_loss(config, d.inputs(), 4);
  // k = ref - lp = -0.5: k3 = exp(-0.5) + 0.5 - 1, d/dlp = -(exp(-0.5) - 1).
  const double k3 = 0.10653065971263342, dk3 = 0.3934693402873666;
  EXPECT_NEAR(out.metrics.at("kl_loss"), k3, 1e-15);
  EXPECT_DOUBLE_EQ(out.metrics.at("pg_loss"), 0.0);
  EXPECT_NEAR(out.loss, -0.01 * 4.5 / 4 + 0.1 * k3, 1e-15);
  EXPECT_NEAR(out.dlog_probs[0], 0.1 * dk3 / 4, 1e-15);
  EXPECT_EQ(out.dlog_probs[4], 0.0);
  EXPECT_DOUBLE_EQ(out.dentropy[2], -0.01 / 4);
  EXPECT_EQ(out.dentropy[4], 0.0);
}

TEST(ObjectivePpoActor, AllClippedTokensHaveNoPolicyGradient) {
  const PpoActorConfig config;
  ActorData d;
  d.old = {-2.0, -2.0, 0.5, 0.5, 0.0};  // ratios e^1 (A > 0) and e^-2.5 (A < 0): all outside [0.8, 1.2]
  d.adv = {1.0, 0.5, -1.0, -2.0, 0.0};
  d.lp = {-1.0, -1.0, -2.0, -2.0, 0.0};
  const ActorResult out = ppo_actor_loss(config, d.inputs(false), 4);
  for (double g : out.dlog_probs) EXPECT_EQ(g, 0.0);
  EXPECT_DOUBLE_EQ(out.metrics.at("pg_clipfrac"), 1.0);
  EXPECT_NEAR(out.loss, (-1.2 - 0.6 + 0.8 + 1.6) / 4, 1e-15);
  EXPECT_TRUE(out.dentropy.empty());
  EXPECT_EQ(out.metrics.count("entropy"), 0u);
}

TEST(ObjectivePpoActor, GradientsMatchFiniteDifferences) {
  for (const std::string kl_type : {"kl", "abs", "mse", "low_var_kl"}) {
    SCOPED_TRACE(kl_type);
    PpoActorConfig config;
    config.clip_ratio_high = 0.28;
    config.entropy_coeff = 0.02;
    config.use_kl_loss = true;
    config.kl_loss_coef = 0.3;
    config.kl_loss_type = kl_type;
    ActorData d;
    d.lp = {-4.0, -1.12, -0.7, -0.1, -3.0};  // ratios inside and outside the clip range, away from its bounds
    d.old = {-4.1, -1.0, -0.5, -1.5, -0.2};
    d.ref = {-1.0, -0.4, -2.5, -0.2, -1.0};  // token 0: k3 = e^3 - 4 beyond its bound of 10 (no gradient from it)
    const ActorResult out = ppo_actor_loss(config, d.inputs(), 6);
    auto loss = [&] { return ppo_actor_loss(config, d.inputs(), 6).loss; };
    expect_gradient("dlog_probs", d.lp, out.dlog_probs, loss);
    expect_gradient("dentropy", d.ent, out.dentropy, loss);
  }
}

TEST(ObjectivePpoActor, MissingReferenceAndBadConfigAreInputErrors) {
  PpoActorConfig config;
  config.use_kl_loss = true;
  ActorData d;
  ActorInputs in = d.inputs();
  in.ref_log_probs = {};
  expect_loss_input_error_naming([&] { ppo_actor_loss(config, in, 4); }, "ref_log_probs");
  EXPECT_NO_THROW(PpoActorConfig{}.validate());
  auto with = [](auto edit) {
    PpoActorConfig c;
    edit(c);
    return [c] { c.validate(); };
  };
  expect_loss_input_error_naming(with([](PpoActorConfig& c) { c.clip_ratio = 0.0; }), "actor.clip_ratio");
  expect_loss_input_error_naming(with([](PpoActorConfig& c) { c.clip_ratio_low = 1.0; }), "actor.clip_ratio_low");
  expect_loss_input_error_naming(with([](PpoActorConfig& c) { c.clip_ratio_high = -0.1; }), "actor.clip_ratio_high");
  expect_loss_input_error_naming(with([](PpoActorConfig& c) { c.clip_ratio_c = 1.0; }), "actor.clip_ratio_c");
  expect_loss_input_error_naming(with([](PpoActorConfig& c) { c.entropy_coeff = INFINITY; }), "actor.entropy_coeff");
  expect_loss_input_error_naming(with([](PpoActorConfig& c) { c.kl_loss_coef = -1.0; }), "actor.kl_loss_coef");
  expect_loss_input_error_naming(with([](PpoActorConfig& c) { c.kl_loss_type = "full"; }), "actor.kl_loss_type");
  expect_loss_input_error_naming(with([](PpoActorConfig& c) { c.loss_agg_mode = "seq-mean-token-mean"; }),
                            "actor.loss_agg_mode");
}

TEST(ObjectiveKlPenalty, EstimatorsByHand) {
  EXPECT_DOUBLE_EQ(kl_penalty("kl", -1.0, -1.5).value, 0.5);
  EXPECT_DOUBLE_EQ(kl_penalty("k1", -1.0, -1.5).dlog_prob, 1.0);
  EXPECT_DOUBLE_EQ(kl_penalty("abs", -2.0, -1.5).value, 0.5);
  EXPECT_DOUBLE_EQ(kl_penalty("abs", -2.0, -1.5).dlog_prob, -1.0);
  EXPECT_DOUBLE_EQ(kl_penalty("mse", -1.0, -1.5).value, 0.125);
  EXPECT_DOUBLE_EQ(kl_penalty("k2", -1.0, -1.5).dlog_prob, 0.5);
  EXPECT_NEAR(kl_penalty("low_var_kl", -1.0, -1.5).value, 0.10653065971263342, 1e-16);
  EXPECT_NEAR(kl_penalty("k3", -1.0, -1.5).dlog_prob, 0.3934693402873666, 1e-16);
  // Clamped: exp(3) - 4 > 10 gives 10 and no gradient.
  EXPECT_DOUBLE_EQ(kl_penalty("low_var_kl", -4.0, -1.0).value, 10.0);
  EXPECT_EQ(kl_penalty("low_var_kl", -4.0, -1.0).dlog_prob, 0.0);
  EXPECT_DOUBLE_EQ(kl_penalty("low_var_kl", 0.0, -30.0).value, 10.0);
  EXPECT_EQ(kl_penalty("low_var_kl", 0.0, -30.0).dlog_prob, 0.0);
}

TEST(ObjectivePpoActor, LogRatioIsClampedAtTwenty) {
  // lp - old = -25: the ratio is exp(-20) and the unclipped term is active (A > 0, ratio below the range), but the
  // clamp stops its gradient; ppo_kl sees the clamped log-ratio.
  const PpoActorConfig config;
  const Doubles lp{-26.0}, old{-1.0}, adv{1.0}, none;
  const std::vector<uint8_t> mask{1};
  const ActorResult out = ppo_actor_loss(config, {lp, old, adv, none, none, mask}, 2);
  EXPECT_NEAR(out.loss, -std::exp(-20.0) / 2, 1e-20);
  EXPECT_EQ(out.dlog_probs[0], 0.0);
  EXPECT_DOUBLE_EQ(out.metrics.at("ppo_kl"), 10.0);
  EXPECT_DOUBLE_EQ(out.metrics.at("pg_clipfrac"), 0.0);
}
