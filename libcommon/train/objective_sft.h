// SFT: next-token cross-entropy, the token-weighted mean over the global batch, plus the MoE router aux loss.
#pragma once
#include <string>
#include <vector>

#include "train/objective.h"

namespace veomni {

class SftObjective final : public Objective {
 public:
  // source_names: a mixed run's sources (data.datasets), whose loss it reports one by one; empty: none.
  explicit SftObjective(const ModelConfig& text_config, std::vector<std::string> source_names = {});

  int64_t normaliser(const MultimodalBatch& batch, bool) const override { return batch.text.valid_tokens; }
  StepLossScale step_scale(int64_t global_normaliser, int64_t micro_batches) const override;
  // ce_sum, aux_sum, then (ce_sum, targets) per source
  size_t num_sums() const override { return 2 + 2 * source_names_.size(); }
  void micro_batch(TrainModel& model, const MultimodalBatch& batch, const StepLossScale& scale, bool reports_shared,
                   std::vector<double>& sums) override;
  void evaluate(TrainModel& model, const MultimodalBatch& batch, const StepLossScale& scale, bool reports_shared,
                std::vector<double>& sums) override;
  // loss, foundation_loss (the cross-entropy), and aux_loss for MoE models (VeOmni's keys); per source loss_<name>
  // (its targets' mean cross-entropy) and tokens_<name>.
  ObjectiveMetrics step_metrics(const std::vector<double>& sums, const StepLossScale& scale) const override;

 private:
  bool moe_;
  double aux_loss_coef_;  // router_aux_loss_coef when the model outputs router logits, else 0
  std::vector<std::string> source_names_;
};

}  // namespace veomni
