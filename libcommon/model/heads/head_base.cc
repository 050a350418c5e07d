// The final norm through the op API and the head group's registration.
#include "model/heads/head_base.h"

#include "core/error.h"
#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

HeadBase::HeadBase(const HeadSite& site) : site_(site) {
  VEOMNI_CHECK(site_.store && site_.final_norm && site_.group < site_.store->groups().size(),
               "a head needs its body's head group and final norm");
}

Tensor HeadBase::norm_forward(const Tensor& hidden, NormSaved* saved) const {
  Tensor normed = empty_like(hidden, hidden.shape());
  Tensor rstd = Tensor::empty({hidden.dim(0)}, DType::F32, hidden.device());
  ops::rmsnorm_forward(hidden, site_.final_norm->value, site_.norm_eps, normed, rstd);
  if (saved) *saved = NormSaved{hidden, rstd};
  return normed;
}

Tensor HeadBase::norm_backward(const Tensor& d_normed, NormSaved saved) const {
  VEOMNI_CHECK(saved.x.defined(), "backward of the final norm without its saved forward input");
  Tensor dx = empty_like(d_normed, d_normed.shape());
  Tensor dweight = grad_if_trainable(*site_.final_norm);
  ops::rmsnorm_backward(d_normed, saved.x, site_.final_norm->value, saved.rstd, dx, dweight);
  return dx;
}

Parameter* HeadBase::add_param(const std::string& name, const Shape& shape) {
  ParamStore& store = *site_.store;
  VEOMNI_CHECK(site_.group + 1 == store.groups().size(),
               "head parameter '{}' must be registered right after its body (the head group is the last)", name);
  Parameter* p = store.add(name, shape);
  if (site_.materialize) p->value = Tensor::zeros(p->local_shape(), site_.compute_dtype, site_.device);
  return p;
}

}  // namespace veomni
