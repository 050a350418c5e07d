// The objective a run optimises (train.objective): how one micro-batch's head outputs become the loss and its
// backward, and the step's metrics. The trainer loop knows objectives only through this interface.
//
// Engine: body (model/model_body.h) -> heads (model/heads/) -> objective (here). Loss normalisation has one owner,
// StepLossScale (train/loss_scale.h): the trainer sums each micro-batch's normaliser over the world before any
// forward, and every objective scales its gradients and reports its loss through that struct, so the loss is the
// same number whatever the parallel layout and the number of micro-batches.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/model_config.h"
#include "model/thinker/multimodal_batch.h"
#include "objective/objective_config.h"
#include "train/objective_names.h"
#include "train/loss_scale.h"
#include "train/train_model.h"

namespace veomni {

// A step's metrics in log_dict.json order; the first is "loss".
using ObjectiveMetrics = std::vector<std::pair<std::string, double>>;

class Objective {
 public:
  virtual ~Objective() = default;

  // This micro-batch's share of the step's normaliser (SFT, value, actor: its non-ignored targets; DPO, reward: its
  // preference pairs). reports_shared: this rank counts what every rank of its SP group sees (pairs).
  virtual int64_t normaliser(const MultimodalBatch& batch, bool reports_shared) const = 0;
  // The step's scale from the normaliser summed over every micro-batch of every rank.
  virtual StepLossScale step_scale(int64_t global_normaliser, int64_t micro_batches) const = 0;
  // How many host sums micro_batch adds to; the trainer sums them over the world once per step.
  virtual size_t num_sums() const = 0;
  // Forward and backward of one of this rank's micro-batches (parameter gradients accumulate); adds its share of the
  // step's sums. reports_shared: this rank reports the values that every rank of its SP group holds (the router aux
  // loss), so that they count once per micro-batch.
  virtual void micro_batch(TrainModel& model, const MultimodalBatch& batch, const StepLossScale& scale,
                           bool reports_shared, std::vector<double>& sums) = 0;
  // Forward only (validation): adds this micro-batch's share of the same sums as micro_batch, with no backward and no
  // gradient. scale is the evaluation's: step_scale of the normaliser summed over the whole eval set.
  virtual void evaluate(TrainModel& model, const MultimodalBatch& batch, const StepLossScale& scale,
                        bool reports_shared, std::vector<double>& sums) = 0;
  // The step's loss and metrics from the world's sums.
  virtual ObjectiveMetrics step_metrics(const std::vector<double>& sums, const StepLossScale& scale) const = 0;
};

// What make_objective needs from the run's config: train.objective and the objectives' sections.
struct ObjectiveSettings {
  std::string name = "sft";
  objective::DpoConfig dpo;
  objective::PpoActorConfig actor;
  objective::ValueConfig critic;
  std::vector<std::string> source_names;  // a mixed run's sources: SFT reports loss_<name> per source
};

// The objective settings.name names, for a model whose language model has text_config. reference: DPO's frozen
// reference model (the start weights, sharded like the policy; under LoRA the policy model itself, run with its
// adapters disabled), or null when the batches carry the reference log-probs (dataset keys ref_chosen_logps /
// ref_rejected_logps) or dpo.reference_free needs none.
std::unique_ptr<Objective> make_objective(const ObjectiveSettings& settings, const ModelConfig& text_config,
                                          TrainModel* reference = nullptr);

}  // namespace veomni
