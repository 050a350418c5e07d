// One SFT micro-batch through a body and an LM head (token cross-entropy), forward then backward: the SFT
// objective's model work, shared by the trainer and the one-model wrappers (CausalLM, MultimodalLM).
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor.h"
#include "model/heads/lm_head.h"
#include "model/model_body.h"
#include "model/thinker/multimodal_batch.h"

namespace veomni {

// What one forward over a micro-batch produced (host numbers).
struct ForwardStats {
  double ce_sum = 0;          // sum of token cross-entropies over this rank's valid targets
  int64_t valid_tokens = 0;   // non-ignored targets on this rank
  double aux_loss = 0;        // load-balancing loss of this micro-batch (0 for dense or output_router_logits off);
                              // under sequence parallelism the same value on every rank of the SP group
};

// One micro-batch's forward as a value: its statistics and, when it ran with save, what its backward needs. The
// body and the head keep nothing of it, so passes are independent: several may be in flight and their backwards
// run in any order (under parallel hooks, the same order on every rank of the group). sft_backward consumes a pass;
// backward of a pass without saved values (a forward with save = false, or a pass already consumed) is an internal
// error.
struct SftPass {
  ForwardStats stats;
  Tensor token_losses;  // f32 [S]: each target's cross-entropy (0 where ignored), on the model's device
  std::unique_ptr<BodySaved> body;  // null when forward ran with save = false or the pass was consumed
  LmHead::LossSaved head;
};

// Body, then the head's cross-entropy on batch.text.target_ids. logits_out as LmHead::loss_forward.
SftPass sft_forward(ModelBody& body, LmHead& head, const MultimodalBatch& batch, bool save,
                    Tensor* logits_out = nullptr);
// d(ce_sum) = ce_grad_scale and d(aux_loss) = aux_grad_scale back through the head and the body, consuming pass.
void sft_backward(ModelBody& body, LmHead& head, SftPass pass, float ce_grad_scale, float aux_grad_scale);

}  // namespace veomni
