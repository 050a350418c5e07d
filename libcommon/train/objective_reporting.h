// The bookkeeping the objectives beyond SFT share: the step's sums laid out as [loss, metrics..., aux loss], the
// step's scale from their normaliser (preference pairs or response tokens), and the metrics in log_dict.json order.
#pragma once
#include <string>
#include <vector>

#include "objective/loss_terms.h"
#include "train/objective.h"

namespace veomni {

class ReportingObjective : public Objective {
 public:
  enum class Normaliser { Pairs, Tokens };

  // metric_names: what the loss function reports, in log_dict.json order (after "loss").
  ReportingObjective(const ModelConfig& text_config, Normaliser normaliser, std::vector<std::string> metric_names);

  // Pairs are counted once per SP group (every rank of it sees the whole row's pairs); tokens by every slice.
  int64_t normaliser(const MultimodalBatch& batch, bool reports_shared) const override;
  StepLossScale step_scale(int64_t global_normaliser, int64_t micro_batches) const override;
  size_t num_sums() const override { return metric_names_.size() + 2; }
  // Forward and backward (micro_batch), forward only (evaluate): the same pass, run().
  void micro_batch(TrainModel& model, const MultimodalBatch& batch, const StepLossScale& scale, bool reports_shared,
                   std::vector<double>& sums) final {
    run(model, batch, scale, reports_shared, sums, true);
  }
  void evaluate(TrainModel& model, const MultimodalBatch& batch, const StepLossScale& scale, bool reports_shared,
                std::vector<double>& sums) final {
    run(model, batch, scale, reports_shared, sums, false);
  }
  // loss (the objective's loss + router_aux_loss_coef x the mean aux loss), its metrics, aux_loss for MoE models.
  ObjectiveMetrics step_metrics(const std::vector<double>& sums, const StepLossScale& scale) const override;

 protected:
  // One micro-batch's forward, its share of the sums, and with `backward` its backward (gradients accumulate).
  virtual void run(TrainModel& model, const MultimodalBatch& batch, const StepLossScale& scale, bool reports_shared,
                   std::vector<double>& sums, bool backward) = 0;
  // The step's pairs or response tokens, the denominators the loss functions divide by.
  int64_t global_count(const StepLossScale& scale) const;
  // Adds a loss contribution and its metrics (a metric not declared at construction is an internal error).
  void add_loss(std::vector<double>& sums, double loss, const objective::Metrics& metrics) const;
  void add_aux(std::vector<double>& sums, double aux_loss) const { sums.back() += aux_loss; }

 private:
  Normaliser normaliser_;
  std::vector<std::string> metric_names_;
  bool moe_;
  double aux_loss_coef_;  // router_aux_loss_coef when the model outputs router logits, else 0
};

}  // namespace veomni
