// Losses over preference pairs (one chosen and one rejected sequence per pair): DPO over per-sequence log-prob sums,
// Bradley-Terry over per-sequence rewards. Each returns this micro-batch's contribution to the mean over the global
// batch's pairs (divided by global_pairs), its gradient and its metrics, so sums over micro-batches and ranks are the
// same whatever the layout.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "objective/loss_terms.h"
#include "objective/objective_config.h"

namespace veomni::objective {

// Per pair of this micro-batch: the policy's and the reference's log-prob sums over the label tokens.
struct DpoInputs {
  std::span<const double> chosen_logps, rejected_logps, ref_chosen_logps, ref_rejected_logps;
};

struct DpoResult {
  double loss = 0.0;
  std::vector<double> dchosen_logps, drejected_logps;  // d loss / d policy log-prob sums, per pair
  Metrics metrics;  // dpo_loss, chosen_rewards, rejected_rewards, reward_accuracy, reward_margin
};

// VeOmni's dpo_loss (veomni/trainer/text_dpo_trainer.py), as TRL's DPOTrainer defined it:
//   z = (chosen - rejected) - (ref_chosen - ref_rejected)       (the reference term is 0 when reference_free)
//   sigmoid: -(1 - ls) log sigmoid(beta z) - ls log sigmoid(-beta z);  ipo: (z - 1 / (2 beta))^2
//   chosen_rewards = beta (chosen - ref_chosen), rejected_rewards = beta (rejected - ref_rejected)
// reward_accuracy counts chosen_rewards > rejected_rewards. With reference_free and no reference model the caller
// passes zero reference log-probs, which makes the rewards beta times the policy's log-probs.
DpoResult dpo_loss(const DpoConfig& config, const DpoInputs& in, int64_t global_pairs);

// Per pair of this micro-batch: the reward (value head at the sequence's last token) of each sequence.
struct RewardInputs {
  std::span<const double> chosen_rewards, rejected_rewards;
};

struct RewardResult {
  double loss = 0.0;
  std::vector<double> dchosen_rewards, drejected_rewards;
  Metrics metrics;  // rm_loss, reward_accuracy, chosen_reward, rejected_reward
};

// Bradley-Terry: -log sigmoid(r_chosen - r_rejected); reward_accuracy counts r_chosen > r_rejected.
RewardResult bradley_terry_loss(const RewardInputs& in, int64_t global_pairs);

}  // namespace veomni::objective
