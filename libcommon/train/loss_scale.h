// The one place that owns loss normalisation: token-weighted mean over the whole global batch.
//
// Every rank processes some micro-batches (slices under SP) of the step. The loss of the step is
//   loss = sum over all tokens of CE / (non-ignored targets in the global batch)
//        + router_aux_loss_coef * mean over the step's micro-batches of their aux loss,
// the same number whatever the data-parallel, sequence-parallel and expert-parallel sizes and the number of
// micro-batches. Backward therefore scales d(ce_sum) by 1/global_valid_tokens and d(aux) by coef/micro_batches.
//
// The trainer fills it through the run's objective (train/objective.h: Objective::step_scale) from the objective's
// normaliser summed over every micro-batch of every rank before any forward; objectives scale their gradients and
// report their losses only through it.
#pragma once
#include <cstdint>

namespace veomni {

struct StepLossScale {
  int64_t global_valid_tokens = 0;  // non-ignored targets of every micro-batch of the step (all ranks)
  int64_t global_pairs = 0;         // preference pairs of the step (DPO and reward models normalise by them)
  int64_t micro_batches = 1;        // micro-batches in the global batch of the step
  double aux_loss_coef = 0.0;       // router_aux_loss_coef (0 when the model has no aux loss)

  float ce_grad_scale() const { return global_valid_tokens > 0 ? 1.0f / static_cast<float>(global_valid_tokens) : 0.0f; }
  float aux_grad_scale() const { return static_cast<float>(aux_loss_coef / static_cast<double>(micro_batches)); }
  // Reported values from the sums over all ranks (aux_sum counts each micro-batch once).
  double ce_loss(double ce_sum) const { return global_valid_tokens > 0 ? ce_sum / static_cast<double>(global_valid_tokens) : 0.0; }
  double aux_loss(double aux_sum) const { return aux_sum / static_cast<double>(micro_batches); }
  double total_loss(double ce_sum, double aux_sum) const { return ce_loss(ce_sum) + aux_loss_coef * aux_loss(aux_sum); }
};

}  // namespace veomni
