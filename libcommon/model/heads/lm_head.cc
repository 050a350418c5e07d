// LM head: norm, logits GEMM, fused softmax cross-entropy whose gradient overwrites the logits, and the two
// backward GEMMs.
#include "model/heads/lm_head.h"

#include "core/error.h"
#include "data/batch.h"
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

// x[i, :] *= weights[i] for x [S, D] in any dtype on any device. A host round trip: the log-prob path's stand-in
// until ops::token_logprobs_backward produces the weighted logits gradient on the device.
void scale_rows(Tensor& x, const Tensor& weights) {
  const Tensor w = weights.is_cpu() ? weights : weights.to(Device::cpu());
  VEOMNI_CHECK(w.dtype() == DType::F32 && w.numel() == x.dim(0), "row weights {} for {}", w.describe(), x.describe());
  const bool in_place = x.is_cpu() && x.dtype() == DType::F32;
  Tensor host = in_place ? x : converted(x, DType::F32).to(Device::cpu());
  float* p = host.data<float>();
  const float* pw = w.data<float>();
  const int64_t d = x.numel() / std::max<int64_t>(x.dim(0), 1);
  for (int64_t i = 0; i < x.dim(0); ++i)
    for (int64_t j = 0; j < d; ++j) p[i * d + j] *= pw[i];
  if (in_place) return;
  Tensor back = host.to(x.device());
  if (x.dtype() == DType::F32) x.copy_from(back);
  else ops::cast(back, x);
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
  ops::matmul(dlogits, true, saved.normed, false, grad_of(*weight_), ce_grad_scale, 1.0f);
  dlogits = saved.normed = Tensor();
  Tensor d_hidden = norm_backward(d_normed, std::move(saved.norm));
  after_backward();
  return d_hidden;
}

LmHead::LogprobOutput LmHead::logprobs_forward(const Tensor& hidden, const Tensor& targets, bool save) {
  LogprobOutput out;
  Tensor logits = logits_forward(hidden, save ? &out.saved.norm : nullptr, save ? &out.saved.normed : nullptr);
  Tensor losses = Tensor::zeros({logits.dim(0)}, DType::F32, logits.device());
  Tensor dlogits = save ? logits : Tensor();
  ops::cross_entropy(logits, targets.to(logits.device()), kIgnoreIndex, 1.0f, losses, dlogits);
  // logprob = -loss; ignored rows stay +0.
  out.logprobs = Tensor::zeros({logits.dim(0)}, DType::F32, logits.device());
  ops::add_(out.logprobs, losses, -1.0f);
  if (save) out.saved.dlogits = dlogits;
  return out;
}

Tensor LmHead::logprobs_backward(LogprobSaved saved, const Tensor& dlogprobs) {
  VEOMNI_CHECK(saved.dlogits.defined(), "LM head backward without a forward that kept its activations");
  VEOMNI_CHECK(dlogprobs.numel() == saved.dlogits.dim(0) && dlogprobs.dtype() == DType::F32,
               "d(logprobs) {} for {} tokens", dlogprobs.describe(), saved.dlogits.dim(0));
  before_backward();
  // d(logits) = -dlogprob[t] * (softmax - onehot)[t]: the row weight is applied to the GEMMs' [S, hidden] operand
  // and result instead of the [S, V] gradient (the same product, V / hidden times less work).
  Tensor weights = converted(dlogprobs, DType::F32).to(Device::cpu()).clone();
  ops::scale_(weights, -1.0f);
  Tensor dlogits = converted(saved.dlogits, site_.compute_dtype);
  saved.dlogits = Tensor();
  Tensor d_normed = empty_like(saved.normed, saved.normed.shape());
  ops::matmul(dlogits, false, weight_->value, false, d_normed);
  scale_rows(d_normed, weights);
  Tensor weighted_normed = saved.normed.clone();
  scale_rows(weighted_normed, weights);
  ops::matmul(dlogits, true, weighted_normed, false, grad_of(*weight_), 1.0f, 1.0f);
  dlogits = weighted_normed = saved.normed = Tensor();
  Tensor d_hidden = norm_backward(d_normed, std::move(saved.norm));
  after_backward();
  return d_hidden;
}

}  // namespace veomni
