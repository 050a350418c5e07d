// Lazily allocated gradients and device-side dtype conversion.
#include "model/layers/common.h"

#include "kernels/ops.h"

namespace veomni {

Tensor& grad_of(Parameter& param) {
  VEOMNI_CHECK(param.value.defined(), "gradient of parameter '{}' requested while its value is not materialised",
               param.name);
  VEOMNI_CHECK(param.trainable, "gradient of the frozen parameter '{}' requested", param.name);
  if (!param.grad.defined()) param.grad = Tensor::zeros(param.value.shape(), DType::F32, param.value.device());
  VEOMNI_CHECK(param.grad.shape() == param.value.shape(), "gradient {} of '{}' does not match its value {}",
               param.grad.describe(), param.name, param.value.describe());
  return param.grad;
}

Tensor grad_or_scratch(Parameter& param) {
  if (param.trainable) return grad_of(param);
  return Tensor::zeros(param.value.shape(), DType::F32, param.value.device());
}

Tensor grad_if_trainable(Parameter& param) { return param.trainable ? grad_of(param) : Tensor(); }

void touch_grads(const ParamGroup& group) {
  for (Parameter* param : group.params)
    if (param->trainable) grad_of(*param);
}

Tensor converted(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  ops::cast(x, out);
  return out;
}

Tensor empty_like(const Tensor& x, const Shape& shape) { return Tensor::empty(shape, x.dtype(), x.device()); }

}  // namespace veomni
