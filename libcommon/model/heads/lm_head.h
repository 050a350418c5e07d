// The LM head: final norm + lm_head projection to the vocabulary, read out as token cross-entropy (SFT) or as the
// per-token log-probability of the labels (DPO, PPO actor, scoring). Logits live only in the compute dtype and are
// overwritten by their gradient: no [tokens, vocab] f32 copy on the bf16 path.
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "model/heads/head_base.h"
#include "model/model_config.h"

namespace veomni {

class LmHead : public HeadBase {
 public:
  // Registers lm_head_name [vocab, hidden] in the site's head group, or lists the embedding there when the config
  // ties them (tie_word_embeddings).
  LmHead(const HeadSite& site, const ModelConfig& config, const std::string& lm_head_name);

  // ---- token cross-entropy (SFT)
  struct LossSaved {
    NormSaved norm;
    Tensor normed;   // [S, hidden] compute dtype
    Tensor dlogits;  // [S, vocab] compute dtype: softmax - onehot(label) at scale 1, written over the logits
  };
  struct LossOutput {
    double ce_sum = 0;         // sum of the token cross-entropies of the non-ignored targets
    int64_t valid_tokens = 0;  // non-ignored targets
    Tensor token_losses;       // f32 [S] on the logits' device: each target's cross-entropy, 0 where ignored
    LossSaved saved;           // empty when forward ran with save = false
  };
  // hidden: the body's output [S, hidden]; targets i64 [S] (shifted, kIgnoreIndex where nothing is predicted).
  // logits_out, when non-null, receives the [S, V] f32 logits (tests and fixtures; costs memory).
  LossOutput loss_forward(const Tensor& hidden, const Tensor& targets, bool save, Tensor* logits_out = nullptr);
  // d(hidden) for d(ce_sum) = ce_grad_scale; the scale is applied inside the two GEMMs (alpha), as the CE gradient
  // is kept at scale 1. Accumulates lm_head's and model.norm's gradients.
  Tensor loss_backward(LossSaved saved, float ce_grad_scale);

  // ---- per-token log-probabilities of the labels (ops::token_logprobs), and the softmax entropy per token
  struct LogprobSaved {
    NormSaved norm;
    Tensor normed;  // [S, hidden]
    Tensor logits;  // [S, vocab] compute dtype; backward writes their gradient over them
    Tensor labels;  // i64 [S] on the logits' device
  };
  struct LogprobOutput {
    Tensor logprobs;  // f32 [S]: log softmax(logits)[label]; zero where the target is ignored
    Tensor entropy;   // f32 [S]: -sum p log p of each token's softmax (with_entropy only; the PPO entropy bonus)
    LogprobSaved saved;
  };
  LogprobOutput logprobs_forward(const Tensor& hidden, const Tensor& targets, bool save, bool with_entropy = false);
  // dlogprobs f32 [S] (any device): the gradient of each token's log-prob (zero rows are allowed); dentropy f32 [S]
  // or undefined. Returns d(hidden) and accumulates lm_head's and model.norm's gradients.
  Tensor logprobs_backward(LogprobSaved saved, const Tensor& dlogprobs, const Tensor& dentropy = Tensor());

  // Inference: the f32 logits [S, vocab] of hidden [S, hidden] (final norm, then the projection in the compute
  // dtype, as the losses read them).
  Tensor logits(const Tensor& hidden);
  // The same logits in the compute dtype, before their conversion to f32: for a choice that the conversion cannot
  // change (the greedy argmax).
  Tensor compute_logits(const Tensor& hidden);

  Parameter& weight() { return *weight_; }

 private:
  // Norm and logits [S, V] in the compute dtype, inside the head group's forward window.
  Tensor logits_forward(const Tensor& hidden, NormSaved* norm, Tensor* normed);

  int64_t vocab_size_;
  Parameter* weight_;  // lm_head, or the embedding when tied
};

}  // namespace veomni
