// DPO and reward-model micro-batches: body -> head -> per-sequence values -> pair loss, and back.
#include "train/objective_preference.h"

#include <optional>

#include "core/error.h"
#include "objective/preference_losses.h"
#include "train/objective_batch_views.h"
#include "train/objective_sequence_sums.h"

namespace veomni {

namespace {

// The chosen and rejected entries of per-sequence values, pair by pair.
struct PairValues {
  std::vector<double> chosen, rejected;
};

PairValues split_pairs(const std::vector<PairIndex>& pairs, const std::vector<double>& per_sequence) {
  PairValues out;
  for (const PairIndex& p : pairs) {
    out.chosen.push_back(per_sequence[p.chosen]);
    out.rejected.push_back(per_sequence[p.rejected]);
  }
  return out;
}

// Per-sequence gradients from per-pair ones (zero for sequences outside pairs: padding).
std::vector<double> join_pairs(const std::vector<PairIndex>& pairs, size_t sequences, const std::vector<double>& chosen,
                               const std::vector<double>& rejected) {
  std::vector<double> out(sequences, 0.0);
  for (size_t k = 0; k < pairs.size(); ++k) {
    out[pairs[k].chosen] = chosen[k];
    out[pairs[k].rejected] = rejected[k];
  }
  return out;
}

const std::vector<std::string> kDpoMetrics{"dpo_loss", "chosen_rewards", "rejected_rewards", "reward_accuracy",
                                           "reward_margin"};
// The policy with its LoRA adapters off while it serves as its own reference (the frozen base), on again after.
class AdaptersDisabled {
 public:
  explicit AdaptersDisabled(TrainModel& model) : model_(model) { model_.set_adapters_enabled(false); }
  ~AdaptersDisabled() { model_.set_adapters_enabled(true); }
  AdaptersDisabled(const AdaptersDisabled&) = delete;
  AdaptersDisabled& operator=(const AdaptersDisabled&) = delete;

 private:
  TrainModel& model_;
};

const std::vector<std::string> kRewardMetrics{"rm_loss", "reward_accuracy", "chosen_reward", "rejected_reward"};

}  // namespace

DpoObjective::DpoObjective(const ModelConfig& text_config, const objective::DpoConfig& config, TrainModel* reference)
    : ReportingObjective(text_config, Normaliser::Pairs, kDpoMetrics), config_(config), reference_(reference) {
  config_.validate("train.dpo_config");
}

std::vector<double> DpoObjective::reference_logps(TrainModel& model, const MultimodalBatch& batch,
                                                  SequenceHooks* sequence) {
  const Batch& text = batch.text;
  if (const auto found = text.sequence_values.find("ref_logps"); found != text.sequence_values.end())
    return std::vector<double>(found->second.begin(), found->second.end());
  if (!reference_) {
    VEOMNI_CHECK(config_.reference_free, "DPO without reference log-probs needs a reference model");
    return std::vector<double>(text.cu_seqlens.size() - 1, 0.0);
  }
  std::optional<AdaptersDisabled> base_only;
  if (reference_ == &model) base_only.emplace(model);
  BodyOutput body = reference_->body().forward(batch, false);
  const LmHead::LogprobOutput lp = reference_->lm_head().logprobs_forward(body.hidden, text.target_ids, false);
  return sequence_sums(text, lp.logprobs, sequence);
}

void DpoObjective::run(TrainModel& model, const MultimodalBatch& batch, const StepLossScale& scale,
                       bool reports_shared, std::vector<double>& sums, bool backward) {
  const Batch& text = batch.text;
  SequenceHooks* sequence = model.body().sequence_hooks();
  const std::vector<PairIndex> pairs = preference_pairs(text);
  const PairValues ref = split_pairs(pairs, reference_logps(model, batch, sequence));

  BodyOutput body = model.body().forward(batch, backward);
  LmHead::LogprobOutput lp = model.lm_head().logprobs_forward(body.hidden, text.target_ids, backward);
  const PairValues policy = split_pairs(pairs, sequence_sums(text, lp.logprobs, sequence));
  const objective::DpoResult result =
      objective::dpo_loss(config_, {policy.chosen, policy.rejected, ref.chosen, ref.rejected}, global_count(scale));
  // Every rank of an SP group holds the same sums, so one of them reports the pair values.
  if (reports_shared) {
    add_loss(sums, result.loss, result.metrics);
    add_aux(sums, body.aux_loss);
  }
  if (!backward) return;
  const std::vector<double> d_sums =
      join_pairs(pairs, text.cu_seqlens.size() - 1, result.dchosen_logps, result.drejected_logps);
  Tensor d_logprobs = sequence_sums_backward(text, d_sums, lp.logprobs.device());
  Tensor d_hidden = model.lm_head().logprobs_backward(std::move(lp.saved), d_logprobs);
  model.body().backward(std::move(body.saved), std::move(d_hidden), scale.aux_grad_scale());
}

RewardObjective::RewardObjective(const ModelConfig& text_config)
    : ReportingObjective(text_config, Normaliser::Pairs, kRewardMetrics) {}

void RewardObjective::run(TrainModel& model, const MultimodalBatch& batch, const StepLossScale& scale,
                          bool reports_shared, std::vector<double>& sums, bool backward) {
  const Batch& text = batch.text;
  SequenceHooks* sequence = model.body().sequence_hooks();
  const std::vector<PairIndex> pairs = preference_pairs(text);

  BodyOutput body = model.body().forward(batch, backward);
  ValueHead::Output values = model.value_head().forward(body.hidden, backward);
  const PairValues rewards = split_pairs(pairs, sequence_last_values(text, values.values, sequence));
  const objective::RewardResult result =
      objective::bradley_terry_loss({rewards.chosen, rewards.rejected}, global_count(scale));
  if (reports_shared) {
    add_loss(sums, result.loss, result.metrics);
    add_aux(sums, body.aux_loss);
  }
  if (!backward) return;
  const std::vector<double> d_last =
      join_pairs(pairs, text.cu_seqlens.size() - 1, result.dchosen_rewards, result.drejected_rewards);
  Tensor d_values = sequence_last_values_backward(text, d_last, values.values.device());
  Tensor d_hidden = model.value_head().backward(std::move(values.saved), d_values);
  model.body().backward(std::move(body.saved), std::move(d_hidden), scale.aux_grad_scale());
}

}  // namespace veomni
