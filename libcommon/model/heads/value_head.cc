// Value head: a [S, hidden] x [hidden, 1] GEMM (+ bias) after the final norm, and its backward.
#include "model/heads/value_head.h"

#include "core/error.h"
#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

ValueHead::ValueHead(const HeadSite& site, const ModelConfig& config, bool bias, const std::string& name_prefix)
    : HeadBase(site) {
  weight_ = add_param(name_prefix + "weight", {1, config.hidden_size});
  if (bias) bias_ = add_param(name_prefix + "bias", {1});
}

ValueHead::Output ValueHead::forward(const Tensor& hidden, bool save) {
  Output out;
  before_forward();
  Tensor normed = norm_forward(hidden, save ? &out.saved.norm : nullptr);
  Tensor values = empty_like(normed, {normed.dim(0), 1});
  ops::matmul(normed, false, weight_->value, true, values);
  if (bias_) ops::add_bias_(values, bias_->value);
  after_forward();
  out.values = converted(values, DType::F32).view({normed.dim(0)});
  if (save) out.saved.normed = normed;
  return out;
}

Tensor ValueHead::backward(Saved saved, const Tensor& dvalues) {
  VEOMNI_CHECK(saved.normed.defined(), "value head backward without a forward that kept its activations");
  const int64_t s = saved.normed.dim(0);
  VEOMNI_CHECK(dvalues.numel() == s && dvalues.dtype() == DType::F32, "d(values) {} for {} tokens",
               dvalues.describe(), s);
  before_backward();
  Tensor dv = converted(dvalues.to(saved.normed.device()), site_.compute_dtype).view({s, 1});
  Tensor d_normed = empty_like(saved.normed, saved.normed.shape());
  ops::matmul(dv, false, weight_->value, false, d_normed);
  if (weight_->trainable) ops::matmul(dv, true, saved.normed, false, grad_of(*weight_), 1.0f, 1.0f);
  if (bias_ && bias_->trainable) ops::bias_grad(dv, grad_of(*bias_));
  saved.normed = Tensor();
  Tensor d_hidden = norm_backward(d_normed, std::move(saved.norm));
  after_backward();
  return d_hidden;
}

}  // namespace veomni
