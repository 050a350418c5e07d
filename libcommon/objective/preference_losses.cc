// DPO and Bradley-Terry losses over preference pairs, in double, with their gradients and metrics.
#include "objective/preference_losses.h"

#include "core/error.h"

namespace veomni::objective {
namespace {

// The local pair count must fit in the global one (the trainer counts both).
void check_pairs(size_t local, int64_t global_pairs) {
  VEOMNI_CHECK(global_pairs >= 0 && local <= static_cast<size_t>(global_pairs),
               "{} pairs in this micro-batch but {} in the global batch", local, global_pairs);
}

// Loss of one pair and its derivative with respect to z.
struct PairLoss {
  double value = 0.0, dz = 0.0;
};

PairLoss dpo_pair_loss(const DpoConfig& config, double z) {
  const double beta = config.beta;
  if (config.loss_type == "ipo") {
    const double d = z - 1.0 / (2.0 * beta);
    return {d * d, 2.0 * d};
  }
  const double ls = config.label_smoothing;
  const double bz = beta * z;
  // d/dz -log sigmoid(bz) = -beta sigmoid(-bz); d/dz -log sigmoid(-bz) = beta sigmoid(bz).
  return {-(1.0 - ls) * log_sigmoid(bz) - ls * log_sigmoid(-bz),
          -(1.0 - ls) * beta * sigmoid(-bz) + ls * beta * sigmoid(bz)};
}

}  // namespace

DpoResult dpo_loss(const DpoConfig& config, const DpoInputs& in, int64_t global_pairs) {
  const size_t n = in.chosen_logps.size();
  VEOMNI_CHECK(in.rejected_logps.size() == n && in.ref_chosen_logps.size() == n && in.ref_rejected_logps.size() == n,
               "DPO inputs of different lengths: {} chosen, {} rejected, {} and {} reference", n,
               in.rejected_logps.size(), in.ref_chosen_logps.size(), in.ref_rejected_logps.size());
  check_pairs(n, global_pairs);
  DpoResult out;
  out.dchosen_logps.assign(n, 0.0);
  out.drejected_logps.assign(n, 0.0);
  double chosen_rewards = 0.0, rejected_rewards = 0.0, correct = 0.0;
  const double inv = n == 0 ? 0.0 : 1.0 / static_cast<double>(global_pairs);
  for (size_t i = 0; i < n; ++i) {
    const double ref_logratio = config.reference_free ? 0.0 : in.ref_chosen_logps[i] - in.ref_rejected_logps[i];
    const double z = (in.chosen_logps[i] - in.rejected_logps[i]) - ref_logratio;
    const PairLoss pair = dpo_pair_loss(config, z);
    out.loss += pair.value * inv;
    out.dchosen_logps[i] = pair.dz * inv;
    out.drejected_logps[i] = -pair.dz * inv;
    const double rc = config.beta * (in.chosen_logps[i] - in.ref_chosen_logps[i]);
    const double rr = config.beta * (in.rejected_logps[i] - in.ref_rejected_logps[i]);
    chosen_rewards += rc;
    rejected_rewards += rr;
    if (rc > rr) correct += 1.0;
  }
  out.metrics = {{"dpo_loss", out.loss},
                 {"chosen_rewards", chosen_rewards * inv},
                 {"rejected_rewards", rejected_rewards * inv},
                 {"reward_accuracy", correct * inv},
                 {"reward_margin", (chosen_rewards - rejected_rewards) * inv}};
  return out;
}

RewardResult bradley_terry_loss(const RewardInputs& in, int64_t global_pairs) {
  const size_t n = in.chosen_rewards.size();
  VEOMNI_CHECK(in.rejected_rewards.size() == n, "reward inputs of different lengths: {} chosen, {} rejected", n,
               in.rejected_rewards.size());
  check_pairs(n, global_pairs);
  RewardResult out;
  out.dchosen_rewards.assign(n, 0.0);
  out.drejected_rewards.assign(n, 0.0);
  double chosen = 0.0, rejected = 0.0, correct = 0.0;
  const double inv = n == 0 ? 0.0 : 1.0 / static_cast<double>(global_pairs);
  for (size_t i = 0; i < n; ++i) {
    const double margin = in.chosen_rewards[i] - in.rejected_rewards[i];
    out.loss += -log_sigmoid(margin) * inv;
    const double dmargin = -sigmoid(-margin) * inv;
    out.dchosen_rewards[i] = dmargin;
    out.drejected_rewards[i] = -dmargin;
    chosen += in.chosen_rewards[i];
    rejected += in.rejected_rewards[i];
    if (margin > 0.0) correct += 1.0;
  }
  out.metrics = {{"rm_loss", out.loss},
                 {"reward_accuracy", correct * inv},
                 {"chosen_reward", chosen * inv},
                 {"rejected_reward", rejected * inv}};
  return out;
}

}  // namespace veomni::objective
