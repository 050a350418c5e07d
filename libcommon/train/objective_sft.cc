// SFT objective: body -> LM head cross-entropy, scaled by 1 / global valid tokens inside the head's GEMMs.
#include "train/objective_sft.h"

#include "model/sft_pass.h"
#include "train/source_losses.h"

namespace veomni {

SftObjective::SftObjective(const ModelConfig& text_config, std::vector<std::string> source_names)
    : moe_(text_config.is_moe()),
      aux_loss_coef_(text_config.is_moe() && text_config.output_router_logits ? text_config.router_aux_loss_coef
                                                                              : 0.0),
      source_names_(std::move(source_names)) {}

StepLossScale SftObjective::step_scale(int64_t global_normaliser, int64_t micro_batches) const {
  StepLossScale scale;
  scale.global_valid_tokens = global_normaliser;
  scale.micro_batches = micro_batches;
  scale.aux_loss_coef = aux_loss_coef_;
  return scale;
}

void SftObjective::micro_batch(TrainModel& model, const MultimodalBatch& batch, const StepLossScale& scale,
                               bool reports_shared, std::vector<double>& sums) {
  SftPass pass = sft_forward(model.body(), model.lm_head(), batch, true);
  const ForwardStats stats = pass.stats;
  if (!source_names_.empty()) add_source_losses(batch, pass.token_losses, sums.data() + 2, source_names_.size());
  pass.token_losses = Tensor();
  sft_backward(model.body(), model.lm_head(), std::move(pass), scale.ce_grad_scale(), scale.aux_grad_scale());
  sums[0] += stats.ce_sum;
  if (reports_shared) sums[1] += stats.aux_loss;
}

void SftObjective::evaluate(TrainModel& model, const MultimodalBatch& batch, const StepLossScale&,
                            bool reports_shared, std::vector<double>& sums) {
  const ForwardStats stats = sft_forward(model.body(), model.lm_head(), batch, false).stats;
  sums[0] += stats.ce_sum;
  if (reports_shared) sums[1] += stats.aux_loss;
}

ObjectiveMetrics SftObjective::step_metrics(const std::vector<double>& sums, const StepLossScale& scale) const {
  ObjectiveMetrics metrics{{"loss", scale.total_loss(sums[0], sums[1])}, {"foundation_loss", scale.ce_loss(sums[0])}};
  if (moe_) metrics.emplace_back("aux_loss", scale.aux_loss(sums[1]));
  if (!source_names_.empty()) {
    const auto per_source = source_loss_metrics(source_names_, sums.data() + 2);
    metrics.insert(metrics.end(), per_source.begin(), per_source.end());
  }
  return metrics;
}

}  // namespace veomni
