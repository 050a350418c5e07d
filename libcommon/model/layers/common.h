// Helpers every layer uses: lazily allocated f32 parameter gradients and dtype conversion on a tensor's device.
#pragma once
#include <utility>

#include "core/tensor.h"
#include "model/param.h"

namespace veomni {

// The parameter's gradient buffer (f32, the value's local shape and device), allocated as zeros on first use.
// Weight-gradient ops accumulate into it, so FSDP may reduce and drop it between uses.
Tensor& grad_of(Parameter& param);

// x itself when it already has `dtype`, else a converted copy on the same device.
Tensor converted(const Tensor& x, DType dtype);

// An uninitialised tensor with x's dtype and device.
Tensor empty_like(const Tensor& x, const Shape& shape);

// A sub-layer's forward result: moves its Saved into `saved` (the caller's own Saved) and returns the output tensor.
template <class Output, class Saved>
Tensor take_out(Output&& output, Saved& saved) {
  saved = std::move(output.saved);
  return std::move(output.out);
}

}  // namespace veomni
