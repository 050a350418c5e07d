// PPO actor and clipped value losses over response tokens, in double, with their gradients and metrics.
#include "objective/token_losses.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace veomni::objective {
namespace {

// verl clamps the log-ratio of the policy to the old (or reference) policy before exponentiating.
constexpr double kLogRatioBound = 20.0;
// and the k3 estimate itself.
constexpr double kLowVarKlBound = 10.0;

// Tokens of the mask that count, checked against the global count (the trainer counts both).
double inverse_token_count(std::span<const uint8_t> mask, int64_t global_tokens) {
  const auto local = static_cast<int64_t>(std::count_if(mask.begin(), mask.end(), [](uint8_t m) { return m != 0; }));
  VEOMNI_CHECK(global_tokens >= local, "{} response tokens in this micro-batch but {} in the global batch", local,
               global_tokens);
  return global_tokens == 0 ? 0.0 : 1.0 / static_cast<double>(global_tokens);
}

void check_length(std::span<const double> values, size_t n, const char* name) {
  VEOMNI_CHECK(values.size() == n, "{} has {} values for {} tokens", name, values.size(), n);
}

// One token's policy-gradient term (before averaging), its derivative with respect to the log-prob, and the clip
// indicators verl reports.
struct PolicyTerm {
  double loss = 0.0, dlog_prob = 0.0, neg_approx_kl = 0.0;
  bool clipped = false, dual_clipped = false;
};

PolicyTerm policy_term(const PpoActorConfig& config, double lp, double old_lp, double advantage) {
  const double raw = lp - old_lp;
  PolicyTerm t;
  t.neg_approx_kl = std::clamp(raw, -kLogRatioBound, kLogRatioBound);
  const double ratio = std::exp(t.neg_approx_kl);
  const double dratio = ratio * clamp_slope(raw, -kLogRatioBound, kLogRatioBound);  // d ratio / d lp
  const double lo = 1.0 - config.low(), hi = 1.0 + config.high();
  const double unclipped = -advantage * ratio;
  const double clipped = -advantage * std::clamp(ratio, lo, hi);
  const MaxShares upper = max_shares(unclipped, clipped);
  const double clip_max = std::max(unclipped, clipped);
  double dclip_max = upper.a * (-advantage * dratio) + upper.b * (-advantage * dratio * clamp_slope(ratio, lo, hi));
  t.clipped = clipped > unclipped;
  t.loss = clip_max;
  t.dlog_prob = dclip_max;
  if (advantage < 0.0) {
    const double dual = -advantage * config.clip_ratio_c;  // a constant: no gradient of its own
    t.dual_clipped = clip_max > dual;
    const MaxShares lower = max_shares(-dual, -clip_max);  // min(dual, clip_max) = -max(-dual, -clip_max)
    t.loss = std::min(dual, clip_max);
    t.dlog_prob = lower.b * dclip_max;
  }
  return t;
}

}  // namespace

KlTerm kl_penalty(const std::string& kl_type, double log_prob, double ref_log_prob) {
  const double diff = log_prob - ref_log_prob;
  if (kl_type == "kl" || kl_type == "k1") return {diff, 1.0};
  if (kl_type == "abs") return {std::fabs(diff), diff > 0.0 ? 1.0 : (diff < 0.0 ? -1.0 : 0.0)};
  if (kl_type == "mse" || kl_type == "k2") return {0.5 * diff * diff, diff};
  VEOMNI_CHECK(kl_type == "low_var_kl" || kl_type == "k3", "unknown kl_loss_type '{}' (validate the config first)",
               kl_type);
  const double k_raw = ref_log_prob - log_prob;
  const double k = std::clamp(k_raw, -kLogRatioBound, kLogRatioBound);
  const double ratio = std::exp(k);
  const double kld = ratio - k - 1.0;
  // d kld / d lp = (ratio - 1) * dk/dlp, dk/dlp = -1 inside the clamp.
  const double dk = -clamp_slope(k_raw, -kLogRatioBound, kLogRatioBound);
  return {std::clamp(kld, -kLowVarKlBound, kLowVarKlBound),
          clamp_slope(kld, -kLowVarKlBound, kLowVarKlBound) * (ratio - 1.0) * dk};
}

ActorResult ppo_actor_loss(const PpoActorConfig& config, const ActorInputs& in, int64_t global_tokens) {
  const size_t n = in.mask.size();
  check_length(in.log_probs, n, "log_probs");
  check_length(in.old_log_probs, n, "old_log_probs");
  check_length(in.advantages, n, "advantages");
  const bool with_entropy = !in.entropy.empty();
  if (with_entropy) check_length(in.entropy, n, "entropy");
  VEOMNI_CHECK(with_entropy || config.entropy_coeff == 0.0, "entropy_coeff {} needs the per-token entropy",
               config.entropy_coeff);
  if (config.use_kl_loss) {
    VEOMNI_INPUT_CHECK(in.ref_log_probs.size() == n,
                       "use_kl_loss needs the dataset key ref_log_probs ({} values for {} tokens); add it to the "
                       "rollout data or set use_kl_loss: false",
                       in.ref_log_probs.size(), n);
  }
  const double inv = inverse_token_count(in.mask, global_tokens);
  ActorResult out;
  out.dlog_probs.assign(n, 0.0);
  if (with_entropy) out.dentropy.assign(n, 0.0);
  double pg_loss = 0.0, clipfrac = 0.0, clipfrac_lower = 0.0, ppo_kl = 0.0, entropy = 0.0, kl_loss = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (in.mask[i] == 0) continue;
    const PolicyTerm t = policy_term(config, in.log_probs[i], in.old_log_probs[i], in.advantages[i]);
    pg_loss += t.loss;
    out.dlog_probs[i] = t.dlog_prob * inv;
    clipfrac += t.clipped ? 1.0 : 0.0;
    clipfrac_lower += t.dual_clipped ? 1.0 : 0.0;
    ppo_kl += -t.neg_approx_kl;
    if (with_entropy) {
      entropy += in.entropy[i];
      out.dentropy[i] = -config.entropy_coeff * inv;
    }
    if (config.use_kl_loss) {
      const KlTerm kl = kl_penalty(config.kl_loss_type, in.log_probs[i], in.ref_log_probs[i]);
      kl_loss += kl.value;
      out.dlog_probs[i] += config.kl_loss_coef * kl.dlog_prob * inv;
    }
  }
  out.loss = pg_loss * inv - config.entropy_coeff * entropy * inv;
  out.metrics = {{"pg_loss", pg_loss * inv},
                 {"pg_clipfrac", clipfrac * inv},
                 {"pg_clipfrac_lower", clipfrac_lower * inv},
                 {"ppo_kl", ppo_kl * inv}};
  if (with_entropy) out.metrics["entropy"] = entropy * inv;
  if (config.use_kl_loss) {
    out.loss += config.kl_loss_coef * kl_loss * inv;
    out.metrics["kl_loss"] = kl_loss * inv;
  }
  return out;
}

ValueResult value_loss(const ValueConfig& config, const ValueInputs& in, int64_t global_tokens) {
  const size_t n = in.mask.size();
  check_length(in.values, n, "values");
  check_length(in.returns, n, "returns");
  check_length(in.old_values, n, "old_values");
  const double inv = inverse_token_count(in.mask, global_tokens);
  ValueResult out;
  out.dvalues.assign(n, 0.0);
  double loss = 0.0, clipfrac = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (in.mask[i] == 0) continue;
    const double v = in.values[i], r = in.returns[i];
    const double lo = in.old_values[i] - config.cliprange_value, hi = in.old_values[i] + config.cliprange_value;
    const double clipped = std::clamp(v, lo, hi);
    const double unclipped_loss = (v - r) * (v - r), clipped_loss = (clipped - r) * (clipped - r);
    const MaxShares share = max_shares(unclipped_loss, clipped_loss);
    loss += std::max(unclipped_loss, clipped_loss);
    clipfrac += clipped_loss > unclipped_loss ? 1.0 : 0.0;
    const double d = share.a * 2.0 * (v - r) + share.b * 2.0 * (clipped - r) * clamp_slope(v, lo, hi);
    out.dvalues[i] = 0.5 * d * inv;
  }
  out.loss = 0.5 * loss * inv;
  out.metrics = {{"vf_loss", out.loss}, {"vf_clipfrac", clipfrac * inv}};
  return out;
}

}  // namespace veomni::objective
