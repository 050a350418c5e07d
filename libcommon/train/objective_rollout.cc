// PPO actor and value-model micro-batches: body -> head -> per-token loss, and back.
#include "train/objective_rollout.h"

#include "objective/token_losses.h"
#include "train/objective_batch_views.h"

namespace veomni {

namespace {

// The actor always reports the policy's entropy (verl's actor/entropy); kl_loss only when it is part of the loss.
std::vector<std::string> actor_metrics(const objective::PpoActorConfig& config) {
  std::vector<std::string> names{"pg_loss", "pg_clipfrac", "pg_clipfrac_lower", "ppo_kl", "entropy"};
  if (config.use_kl_loss) names.push_back("kl_loss");
  return names;
}

}  // namespace

PpoActorObjective::PpoActorObjective(const ModelConfig& text_config, const objective::PpoActorConfig& config)
    : ReportingObjective(text_config, Normaliser::Tokens, actor_metrics(config)), config_(config) {
  config_.validate("train.actor");
}

void PpoActorObjective::run(TrainModel& model, const MultimodalBatch& batch, const StepLossScale& scale,
                            bool reports_shared, std::vector<double>& sums, bool backward) {
  const Batch& text = batch.text;
  const std::vector<double> old_log_probs = token_values_of(text, "old_log_probs");
  const std::vector<double> advantages = token_values_of(text, "advantages");
  const std::vector<double> ref_log_probs =
      config_.use_kl_loss ? token_values_of(text, "ref_log_probs") : std::vector<double>();
  const std::vector<uint8_t> mask = response_mask(text);

  BodyOutput body = model.body().forward(batch, backward);
  LmHead::LogprobOutput lp = model.lm_head().logprobs_forward(body.hidden, text.target_ids, backward, true);
  const std::vector<double> log_probs = host_doubles(lp.logprobs);
  const std::vector<double> entropy = host_doubles(lp.entropy);
  objective::ActorInputs in{log_probs, old_log_probs, advantages, ref_log_probs, entropy, mask};
  const objective::ActorResult result = objective::ppo_actor_loss(config_, in, global_count(scale));
  // Each SP rank holds its own tokens: every rank adds its share; the aux loss is the group's, added once.
  add_loss(sums, result.loss, result.metrics);
  if (reports_shared) add_aux(sums, body.aux_loss);
  if (!backward) return;

  const Device device = lp.logprobs.device();
  const Tensor d_entropy = config_.entropy_coeff != 0.0 ? f32_tensor(result.dentropy, device) : Tensor();
  Tensor d_hidden = model.lm_head().logprobs_backward(std::move(lp.saved), f32_tensor(result.dlog_probs, device),
                                                      d_entropy);
  model.body().backward(std::move(body.saved), std::move(d_hidden), scale.aux_grad_scale());
}

ValueObjective::ValueObjective(const ModelConfig& text_config, const objective::ValueConfig& config)
    : ReportingObjective(text_config, Normaliser::Tokens, {"vf_loss", "vf_clipfrac"}), config_(config) {
  config_.validate("train.critic");
}

void ValueObjective::run(TrainModel& model, const MultimodalBatch& batch, const StepLossScale& scale,
                         bool reports_shared, std::vector<double>& sums, bool backward) {
  const Batch& text = batch.text;
  const std::vector<double> returns = token_values_of(text, "returns");
  const std::vector<double> old_values = token_values_of(text, "old_values");
  const std::vector<uint8_t> mask = response_mask(text);

  BodyOutput body = model.body().forward(batch, backward);
  ValueHead::Output values = model.value_head().forward(body.hidden, backward);
  const std::vector<double> v = host_doubles(values.values);
  const objective::ValueResult result =
      objective::value_loss(config_, {v, returns, old_values, mask}, global_count(scale));
  add_loss(sums, result.loss, result.metrics);
  if (reports_shared) add_aux(sums, body.aux_loss);
  if (!backward) return;

  Tensor d_hidden =
      model.value_head().backward(std::move(values.saved), f32_tensor(result.dvalues, values.values.device()));
  model.body().backward(std::move(body.saved), std::move(d_hidden), scale.aux_grad_scale());
}

}  // namespace veomni
