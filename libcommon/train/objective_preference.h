// The objectives over preference pairs: DPO (the LM head's sequence log-probs against a frozen reference) and the
// Bradley-Terry reward model (the value head at each sequence's last token). A pair is one sample, chosen then
// rejected; the loss is the mean over the global batch's pairs.
#pragma once
#include "objective/objective_config.h"
#include "train/objective_reporting.h"

namespace veomni {

class DpoObjective final : public ReportingObjective {
 public:
  // reference: the frozen reference model, or null (the batch carries ref log-probs, or reference_free). Under LoRA
  // it is the policy itself: its reference pass runs with the adapters disabled (the frozen base).
  DpoObjective(const ModelConfig& text_config, const objective::DpoConfig& config, TrainModel* reference);
  void run(TrainModel& model, const MultimodalBatch& batch, const StepLossScale& scale, bool reports_shared,
           std::vector<double>& sums, bool backward) override;

 private:
  // Per packed sequence: the reference's log-prob sums (the batch's, the reference model's, or zeros).
  std::vector<double> reference_logps(TrainModel& model, const MultimodalBatch& batch, SequenceHooks* sequence);

  objective::DpoConfig config_;
  TrainModel* reference_;
};

class RewardObjective final : public ReportingObjective {
 public:
  explicit RewardObjective(const ModelConfig& text_config);
  void run(TrainModel& model, const MultimodalBatch& batch, const StepLossScale& scale, bool reports_shared,
           std::vector<double>& sums, bool backward) override;
};

}  // namespace veomni
