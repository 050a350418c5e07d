// Sums, scale and metrics of the objectives beyond SFT.
#include "train/objective_reporting.h"

#include <algorithm>

#include "core/error.h"
#include "train/objective_batch_views.h"

namespace veomni {

ReportingObjective::ReportingObjective(const ModelConfig& text_config, Normaliser normaliser,
                                       std::vector<std::string> metric_names)
    : normaliser_(normaliser),
      metric_names_(std::move(metric_names)),
      moe_(text_config.is_moe()),
      // The router aux loss joins every objective when the model config asks for router logits (as TRL's DPO
      // trainer adds it when output_router_logits is on); the reference model never adds it.
      aux_loss_coef_(text_config.is_moe() && text_config.output_router_logits ? text_config.router_aux_loss_coef
                                                                              : 0.0) {}

int64_t ReportingObjective::normaliser(const MultimodalBatch& batch, bool reports_shared) const {
  if (normaliser_ == Normaliser::Tokens) return batch.text.valid_tokens;
  return reports_shared ? static_cast<int64_t>(preference_pairs(batch.text).size()) : 0;
}

StepLossScale ReportingObjective::step_scale(int64_t global_normaliser, int64_t micro_batches) const {
  StepLossScale scale;
  if (normaliser_ == Normaliser::Tokens) scale.global_valid_tokens = global_normaliser;
  else scale.global_pairs = global_normaliser;
  scale.micro_batches = micro_batches;
  scale.aux_loss_coef = aux_loss_coef_;
  return scale;
}

int64_t ReportingObjective::global_count(const StepLossScale& scale) const {
  return normaliser_ == Normaliser::Tokens ? scale.global_valid_tokens : scale.global_pairs;
}

void ReportingObjective::add_loss(std::vector<double>& sums, double loss, const objective::Metrics& metrics) const {
  sums[0] += loss;
  for (const auto& [name, value] : metrics) {
    const auto at = std::find(metric_names_.begin(), metric_names_.end(), name);
    VEOMNI_CHECK(at != metric_names_.end(), "metric '{}' was not declared by its objective", name);
    sums[1 + static_cast<size_t>(at - metric_names_.begin())] += value;
  }
}

ObjectiveMetrics ReportingObjective::step_metrics(const std::vector<double>& sums, const StepLossScale& scale) const {
  ObjectiveMetrics metrics{{"loss", sums[0] + scale.aux_loss_coef * scale.aux_loss(sums.back())}};
  for (size_t k = 0; k < metric_names_.size(); ++k) metrics.emplace_back(metric_names_[k], sums[1 + k]);
  if (moe_) metrics.emplace_back("aux_loss", scale.aux_loss(sums.back()));
  return metrics;
}

}  // namespace veomni
