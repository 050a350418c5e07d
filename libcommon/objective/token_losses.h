// Losses over response tokens (RL): the PPO actor's clipped surrogate with optional KL loss and entropy bonus, and the
// critic's clipped value loss. Inputs are per-token values of this micro-batch with a mask of the response tokens
// (label != ignore_index); every sum is divided by global_tokens, the response tokens of the whole global batch
// (verl's token-mean agg_loss), so sums over micro-batches and ranks are the same whatever the layout. Masked tokens
// get zero gradients. A global batch without response tokens gives zeros.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "objective/loss_terms.h"
#include "objective/objective_config.h"

namespace veomni::objective {

// verl's kl_penalty (verl/trainer/ppo/core_algos.py): the per-token estimate of KL(policy || reference) from
// log_prob and ref_log_prob and its derivative with respect to log_prob.
//   kl / k1: lp - ref;  abs: |lp - ref|;  mse / k2: (lp - ref)^2 / 2;
//   low_var_kl / k3 (Schulman's k3): clamp(exp(k) - k - 1, -10, 10) with k = clamp(ref - lp, -20, 20).
struct KlTerm {
  double value = 0.0, dlog_prob = 0.0;
};
KlTerm kl_penalty(const std::string& kl_type, double log_prob, double ref_log_prob);

struct ActorInputs {
  std::span<const double> log_probs;      // the policy's label log-probs now
  std::span<const double> old_log_probs;  // dataset key old_log_probs
  std::span<const double> advantages;     // dataset key advantages
  std::span<const double> ref_log_probs;  // dataset key ref_log_probs; needed only with use_kl_loss
  std::span<const double> entropy;        // softmax entropy per token; empty when not computed
  std::span<const uint8_t> mask;          // 1 on response tokens
};

struct ActorResult {
  double loss = 0.0;
  std::vector<double> dlog_probs;  // d loss / d log_probs
  std::vector<double> dentropy;    // d loss / d entropy (empty when no entropy was given)
  // pg_loss, pg_clipfrac, pg_clipfrac_lower, ppo_kl; entropy when given; kl_loss with use_kl_loss.
  Metrics metrics;
};

// verl's compute_policy_loss_vanilla with token-mean agg_loss, as its dp_actor combines the terms:
//   ratio = exp(clamp(lp - old, -20, 20))
//   pg = max(-A ratio, -A clamp(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)), and for A < 0
//        min(that, -A clip_ratio_c) (dual clip)
//   loss = mean(pg) - entropy_coeff * mean(entropy) + [use_kl_loss] kl_loss_coef * mean(kl_penalty)
// Metrics: pg_clipfrac = mean(clipped term > unclipped), pg_clipfrac_lower = mean(dual clip active),
// ppo_kl = mean(old - lp) (clamped as the ratio). Gradients split ties evenly, as torch's maximum/minimum do.
// entropy must be given when entropy_coeff != 0; ref_log_probs when use_kl_loss (InputError otherwise).
ActorResult ppo_actor_loss(const PpoActorConfig& config, const ActorInputs& in, int64_t global_tokens);

struct ValueInputs {
  std::span<const double> values;      // the value head now
  std::span<const double> returns;     // dataset key returns
  std::span<const double> old_values;  // dataset key old_values
  std::span<const uint8_t> mask;       // 1 on response tokens
};

struct ValueResult {
  double loss = 0.0;
  std::vector<double> dvalues;  // d loss / d values
  Metrics metrics;              // vf_loss, vf_clipfrac
};

// verl's compute_value_loss with token-mean agg_loss:
//   clipped = clamp(v, old - cliprange_value, old + cliprange_value)
//   loss = 0.5 mean(max((v - R)^2, (clipped - R)^2)); vf_clipfrac = mean((clipped - R)^2 > (v - R)^2)
ValueResult value_loss(const ValueConfig& config, const ValueInputs& in, int64_t global_tokens);

}  // namespace veomni::objective
