// Lazily allocated gradients and device-side dtype conversion.
#include "model/layers/common.h"

#include "kernels/ops.h"

namespace veomni {

Tensor& grad_of(Parameter& param) {
  VEOMNI_CHECK(param.value.defined(), "gradient of parameter '{}' requested while its value is not materialised",
               param.name);
  if (!param.grad.defined()) param.grad = Tensor::zeros(param.value.shape(), DType::F32, param.value.device());
  VEOMNI_CHECK(param.grad.shape() == param.value.shape(), "gradient {} of '{}' does not match its value {}",
               param.grad.describe(), param.name, param.value.describe());
  return param.grad;
}

Tensor converted(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  ops::cast(x, out);
  return out;
}

Tensor empty_like(const Tensor& x, const Shape& shape) { return Tensor::empty(shape, x.dtype(), x.device()); }

}  // namespace veomni
