// Bias-free linear layer y = x W^T over a Parameter, keeping its input for the weight gradient.
#pragma once
#include "core/tensor.h"
#include "model/param.h"

namespace veomni {

class Linear {
 public:
  explicit Linear(Parameter* weight) : weight_(weight) {}

  // x [N, in] -> [N, out]; keeps x (a shared handle, no copy) when save.
  Tensor forward(const Tensor& x, bool save);
  // Returns dx = dy W and accumulates dW += dy^T x.
  Tensor backward(const Tensor& dy);
  // dx += dy W and dW += dy^T x: for layers whose input feeds several projections.
  void backward_accumulate(const Tensor& dy, Tensor& dx);
  void release() { x_ = Tensor(); }

  Parameter& weight() const { return *weight_; }

 private:
  void weight_grad(const Tensor& dy);

  Parameter* weight_;
  Tensor x_;
};

}  // namespace veomni
