// LM head: norm, logits GEMM, fused softmax cross-entropy whose gradient overwrites the logits, and the two
// backward GEMMs.
#include "model/heads/lm_head.h"

#include "core/error.h"
#include "data/batch.h"
#include "kernels/decode_ops.h"
#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

namespace {

int64_t count_valid_targets(const Tensor& targets) {
  const Tensor host = targets.is_cpu() ? targets : targets.to(Device::cpu());
  const int64_t* p = host.data<int64_t>();
  int64_t valid = 0;
  for (int64_t i = 0; i < host.numel(); ++i) valid += p[i] != kIgnoreIndex;
  return valid;
}

}  // namespace

LmHead::LmHead(const HeadSite& site, const ModelConfig& config, const std::string& lm_head_name)
    : HeadBase(site), vocab_size_(config.vocab_size) {
  if (config.tie_word_embeddings) {
    VEOMNI_CHECK(site_.embed_tokens != nullptr, "a tied LM head needs the body's embedding");
    site_.store->add_shared(site_.embed_tokens);
    weight_ = site_.embed_tokens;
  } else {
    weight_ = add_param(lm_head_name, {config.vocab_size, config.hidden_size});
  }
}

// Final norm and logits in the compute dtype (HF's lm_head). The loss reads them as they are: its math is f32 either
// way (HF upcasts the bf16 logits, which is exact), so no f32 copy of the [S, V] logits is made (2.5 GB at seq 4096
// and Qwen3's vocabulary, and two full-size casts a step).
Tensor LmHead::logits_forward(const Tensor& hidden, NormSaved* norm, Tensor* normed) {
  before_forward();
  Tensor n = norm_forward(hidden, norm);
  Tensor logits = empty_like(n, {n.dim(0), vocab_size_});
  ops::matmul(n, false, weight_->value, true, logits);
  after_forward();
  if (normed) *normed = n;
  return logits;
}

Tensor LmHead::compute_logits(const Tensor& hidden) {
  before_forward();
  Tensor logits = empty_like(hidden, {hidden.dim(0), vocab_size_});
  // Nothing is kept for a backward: the final norm runs inside the GEMM where the kernel can (decoding's few rows).
  ops::rmsnorm_matmul(hidden, site_.final_norm->value, site_.norm_eps, weight_->value, logits);
  after_forward();
  return logits;
}

Tensor LmHead::logits(const Tensor& hidden) { return converted(compute_logits(hidden), DType::F32); }

LmHead::LossOutput LmHead::loss_forward(const Tensor& hidden, const Tensor& targets, bool save, Tensor* logits_out) {
  LossOutput out;
  Tensor logits = logits_forward(hidden, save ? &out.saved.norm : nullptr, save ? &out.saved.normed : nullptr);
  // A copy either way: the gradient is written over `logits` below.
  if (logits_out) *logits_out = logits.dtype() == DType::F32 ? logits.clone() : converted(logits, DType::F32);
  Tensor losses = Tensor::empty({logits.dim(0)}, DType::F32, logits.device());
  // The gradient is produced in place of the logits (in their dtype, rounded to nearest even as a cast of the f32
  // gradient would be) with scale 1; backward applies ce_grad_scale in its GEMMs.
  Tensor dlogits = save ? logits : Tensor();
  ops::cross_entropy(logits, targets.to(logits.device()), kIgnoreIndex, 1.0f, losses, dlogits);
  out.ce_sum = ops::sum(losses);
  out.token_losses = losses;
  out.valid_tokens = count_valid_targets(targets);
  if (save) out.saved.dlogits = dlogits;
  return out;
}

Tensor LmHead::loss_backward(LossSaved saved, float ce_grad_scale) {
  VEOMNI_CHECK(saved.dlogits.defined(), "LM head backward without a forward that kept its activations");
  before_backward();
  Tensor dlogits = converted(saved.dlogits, site_.compute_dtype);
  saved.dlogits = Tensor();
  Tensor d_normed = empty_like(saved.normed, saved.normed.shape());
  ops::matmul(dlogits, false, weight_->value, false, d_normed, ce_grad_scale);
  if (weight_->trainable) ops::matmul(dlogits, true, saved.normed, false, grad_of(*weight_), ce_grad_scale, 1.0f);
  dlogits = saved.normed = Tensor();
  Tensor d_hidden = norm_backward(d_normed, std::move(saved.norm));
  after_backward();
  return d_hidden;
}

LmHead::LogprobOutput LmHead::logprobs_forward(const Tensor& hidden, const Tensor& targets, bool save,
                                               bool with_entropy) {
  LogprobOutput out;
  Tensor logits = logits_forward(hidden, save ? &out.saved.norm : nullptr, save ? &out.saved.normed : nullptr);
  Tensor labels = targets.to(logits.device());
  out.logprobs = Tensor::zeros({logits.dim(0)}, DType::F32, logits.device());
  if (with_entropy) out.entropy = Tensor::zeros({logits.dim(0)}, DType::F32, logits.device());
  ops::token_logprobs(logits, labels, kIgnoreIndex, out.logprobs, out.entropy);
  if (save) {
    out.saved.logits = logits;
    out.saved.labels = labels;
  }
  return out;
}

Tensor LmHead::logprobs_backward(LogprobSaved saved, const Tensor& dlogprobs, const Tensor& dentropy) {
  VEOMNI_CHECK(saved.logits.defined(), "LM head backward without a forward that kept its activations");
  const int64_t s = saved.logits.dim(0);
  VEOMNI_CHECK(dlogprobs.numel() == s && dlogprobs.dtype() == DType::F32, "d(logprobs) {} for {} tokens",
               dlogprobs.describe(), s);
  VEOMNI_CHECK(!dentropy.defined() || (dentropy.numel() == s && dentropy.dtype() == DType::F32),
               "d(entropy) {} for {} tokens", dentropy.describe(), s);
  before_backward();
  // The logits' gradient is written over them, in the compute dtype.
  Tensor dlogits = saved.logits;
  saved.logits = Tensor();
  const Device device = dlogits.device();
  ops::token_logprobs_backward(dlogits, saved.labels, kIgnoreIndex, dlogprobs.to(device),
                               dentropy.defined() ? dentropy.to(device) : Tensor(), dlogits);
  dlogits = converted(dlogits, site_.compute_dtype);
  Tensor d_normed = empty_like(saved.normed, saved.normed.shape());
  ops::matmul(dlogits, false, weight_->value, false, d_normed);
  if (weight_->trainable) ops::matmul(dlogits, true, saved.normed, false, grad_of(*weight_), 1.0f, 1.0f);
  dlogits = saved.normed = Tensor();
  Tensor d_hidden = norm_backward(d_normed, std::move(saved.norm));
  after_backward();
  return d_hidden;
}

}  // namespace veomni
