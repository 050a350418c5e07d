// The objectives over rollout tokens (RL): the PPO actor (the LM head's label log-probs and entropy against the
// dataset's old_log_probs, advantages and ref_log_probs) and the value model (a value per token against returns and
// old_values). The loss is the token mean over the global batch's response tokens (labels that are not -100).
#pragma once
#include "objective/objective_config.h"
#include "train/objective_reporting.h"

namespace veomni {

class PpoActorObjective final : public ReportingObjective {
 public:
  PpoActorObjective(const ModelConfig& text_config, const objective::PpoActorConfig& config);
  void run(TrainModel& model, const MultimodalBatch& batch, const StepLossScale& scale, bool reports_shared,
           std::vector<double>& sums, bool backward) override;

 private:
  objective::PpoActorConfig config_;
};

class ValueObjective final : public ReportingObjective {
 public:
  ValueObjective(const ModelConfig& text_config, const objective::ValueConfig& config);
  void run(TrainModel& model, const MultimodalBatch& batch, const StepLossScale& scale, bool reports_shared,
           std::vector<double>& sums, bool backward) override;

 private:
  objective::ValueConfig config_;
};

}  // namespace veomni
