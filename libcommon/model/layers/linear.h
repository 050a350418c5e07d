// Bias-free linear layer y = x W^T over a Parameter; forward returns the input that the weight gradient needs.
#pragma once
#include "core/tensor.h"
#include "model/param.h"

namespace veomni {

class Linear {
 public:
  struct Saved {
    Tensor x;  // the forward input (a shared handle, no copy)
  };
  struct Output {
    Tensor out;
    Saved saved;
  };

  explicit Linear(Parameter* weight) : weight_(weight) {}

  // x [N, in] -> [N, out]; saved is empty unless save.
  Output forward(const Tensor& x, bool save) const;
  // Returns dx = dy W and accumulates dW += dy^T x.
  Tensor backward(Saved&& saved, const Tensor& dy) const;
  // dx += dy W and dW += dy^T x: for layers whose input feeds several projections.
  void backward_accumulate(Saved&& saved, const Tensor& dy, Tensor& dx) const;

  Parameter& weight() const { return *weight_; }

 private:
  void weight_grad(Saved saved, const Tensor& dy) const;

  Parameter* weight_;
};

}  // namespace veomni
