// Linear layer with bias, y = x W^T + b, optionally over a block of rows of a fused weight (the qkv projection).
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "model/param.h"

namespace veomni {

class BiasedLinear {
 public:
  struct Saved {
    Tensor x;  // the forward input (a shared handle, no copy)
  };
  struct Output {
    Tensor out;
    Saved saved;
  };

  // Uses rows [row_begin, row_end) of weight [out, in] and bias [out]; row_end = -1 means all rows. The rows are
  // taken from the parameters at each call, so FSDP may gather and release them between calls.
  BiasedLinear(Parameter* weight, Parameter* bias, int64_t row_begin = 0, int64_t row_end = -1)
      : weight_(weight), bias_(bias), row_begin_(row_begin), row_end_(row_end) {}

  // x [N, in] -> [N, out]; saved is empty unless save.
  Output forward(const Tensor& x, bool save) const;
  // Returns dx = dy W; accumulates dW += dy^T x and db += column sums of dy.
  Tensor backward(Saved&& saved, const Tensor& dy) const;
  // dx += dy W, with the same parameter gradients: for inputs that feed several projections.
  void backward_accumulate(Saved&& saved, const Tensor& dy, Tensor& dx) const;

 private:
  Tensor rows(const Tensor& full) const;
  void parameter_grads(Saved saved, const Tensor& dy) const;

  Parameter* weight_;
  Parameter* bias_;
  int64_t row_begin_;
  int64_t row_end_;
};

}  // namespace veomni
