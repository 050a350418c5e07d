// What every head shares: the final norm (model.norm) and the FSDP "head" group window around its work.
#pragma once
#include <string>

#include "core/tensor.h"
#include "model/model_body.h"
#include "model/param.h"
#include "model/parallel_hooks.h"

namespace veomni {

// What the final norm's backward needs.
struct NormSaved {
  Tensor x;     // [S, hidden] the body's hidden states
  Tensor rstd;  // f32 [S]
};

class HeadBase {
 public:
  explicit HeadBase(const HeadSite& site);
  // FSDP hooks of the head group (installed after construction, as the body's).
  void set_param_hooks(ParamHooks* hooks) { hooks_ = hooks; }

 protected:
  ParamGroup& group() { return site_.store->groups()[site_.group]; }
  void before_forward() { if (hooks_) hooks_->before_forward(group()); }
  void after_forward() { if (hooks_) hooks_->after_forward(group()); }
  void before_backward() { if (hooks_) hooks_->before_backward(group()); }
  void after_backward() { if (hooks_) hooks_->after_backward(group()); }
  // model.norm over hidden [S, hidden]; keeps its input and rstd in *saved when saved is non-null.
  Tensor norm_forward(const Tensor& hidden, NormSaved* saved) const;
  // d(hidden) from d(normed); accumulates model.norm.weight's gradient.
  Tensor norm_backward(const Tensor& d_normed, NormSaved saved) const;
  // Registers a projection parameter in the head group (the group being built: the body's last), materialised as
  // zeros when the body's parameters were.
  Parameter* add_param(const std::string& name, const Shape& shape);

  HeadSite site_;
  ParamHooks* hooks_ = nullptr;
};

}  // namespace veomni
