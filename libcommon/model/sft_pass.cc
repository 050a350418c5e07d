// SFT micro-batch: body -> LM head cross-entropy, and back.
#include "model/sft_pass.h"

#include "core/error.h"

namespace veomni {

SftPass sft_forward(ModelBody& body, LmHead& head, const MultimodalBatch& batch, bool save, Tensor* logits_out) {
  BodyOutput out = body.forward(batch, save);
  SftPass pass;
  LmHead::LossOutput loss = head.loss_forward(out.hidden, batch.text.target_ids, save, logits_out);
  out.hidden = Tensor();
  pass.stats.ce_sum = loss.ce_sum;
  pass.token_losses = loss.token_losses;
  pass.stats.valid_tokens = loss.valid_tokens;
  pass.stats.aux_loss = out.aux_loss;
  pass.body = std::move(out.saved);
  pass.head = std::move(loss.saved);
  return pass;
}

void sft_backward(ModelBody& body, LmHead& head, SftPass pass, float ce_grad_scale, float aux_grad_scale) {
  VEOMNI_CHECK(pass.body != nullptr,
               "backward of a pass without saved values: its forward ran with save = false, or a backward already "
               "consumed it");
  Tensor d_hidden = head.loss_backward(std::move(pass.head), ce_grad_scale);
  body.backward(std::move(pass.body), std::move(d_hidden), aux_grad_scale);
}

}  // namespace veomni
