// Helpers every layer uses: lazily allocated f32 parameter gradients and dtype conversion on a tensor's device.
#pragma once
#include <utility>

#include "core/tensor.h"
#include "model/param.h"

namespace veomni {

// The parameter's gradient buffer (f32, the value's local shape and device), allocated as zeros on first use.
// Weight-gradient ops accumulate into it, so FSDP may reduce and drop it between uses. A frozen parameter
// (trainable false) never has one: asking for it is an internal error (its layer skips the weight-gradient work).
Tensor& grad_of(Parameter& param);

// Where an op that computes a parameter gradient together with the input gradient (the norms) writes the former:
// the parameter's gradient when it trains, else f32 zeros of its shape that are dropped after the call.
Tensor grad_or_scratch(Parameter& param);
// The parameter's gradient when it trains, else an undefined tensor: for ops that skip a frozen weight's gradient.
Tensor grad_if_trainable(Parameter& param);

// The zero gradients of a group's trainable parameters, for a group whose backward had no work to do (FSDP still
// reduces every group's gradients).
void touch_grads(const ParamGroup& group);

// x itself when it already has `dtype`, else a converted copy on the same device.
Tensor converted(const Tensor& x, DType dtype);

// An uninitialised tensor with x's dtype and device.
Tensor empty_like(const Tensor& x, const Shape& shape);

// A sub-layer's forward result: moves its Saved into `saved` (the caller's own Saved) and returns the output (a
// tensor, or SharedInputLinears' tensors).
template <class Output, class Saved>
auto take_out(Output&& output, Saved& saved) {
  saved = std::move(output.saved);
  return std::move(output.out);
}

}  // namespace veomni
