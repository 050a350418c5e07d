// Bias-free linear layer y = x W^T over a Parameter (with its LoRA adapter when it has one); forward returns the
// input that the gradients need. With fp8 on, y = x W^T and dx = dy W run as rowwise-scaled E4M3 GEMMs where
// model/layers/fp8_linear.h applies (CUDA, bf16); dW = dy^T x and the adapter stay in the compute dtype.
#pragma once
#include <string>

#include "core/tensor.h"
#include "model/layers/lora_adapter.h"
#include "model/param.h"

namespace veomni {

class Linear {
 public:
  struct Saved {
    Tensor x;        // the forward input (a shared handle, no copy)
    Tensor lora_xa;  // x A^T of the adapter (undefined without an applied adapter)
  };
  struct Output {
    Tensor out;
    Saved saved;
  };

  explicit Linear(Parameter* weight, LoraAdapter adapter = {}) : weight_(weight), adapter_(adapter) {}
  // Registers `name` of `shape` [out, in] in the store's current group, and its adapter right after it when the
  // store's LoRA settings target its module.
  Linear(ParamStore& store, const std::string& name, const Shape& shape, bool fp8 = false);

  // x [N, in] -> [N, out]; saved is empty unless save. A defined residual [N, out] is added to the output: inside the
  // GEMM that writes it (ops::matmul's addend) when it has x's dtype and the GEMM is not FP8, else by an add after it.
  // Backward is unchanged (the residual's gradient is its caller's).
  Output forward(const Tensor& x, bool save, const Tensor& residual = Tensor()) const;
  // The same without the adapter (y = x W^T, saved.lora_xa undefined): for SharedInputLinears, which runs the
  // adapters of projections that share an input together. Backward then leaves the adapter to the caller too.
  Output forward_base(const Tensor& x, bool save, const Tensor& residual = Tensor()) const;
  // Whether the base GEMM of x can add onto an output that holds the adapter's product (not through FP8).
  bool base_accumulates(const Tensor& x) const { return !fp8_applies(x); }
  // y += x W^T, for a y that holds the adapter's product (base_accumulates(x)); returns what forward_base saves.
  Saved forward_base_onto(const Tensor& x, Tensor& y, bool save) const;
  // Inference: y [N, out] += x W^T (+ the adapter's part), nothing saved. The residual adds of decoding ride on the
  // GEMM this way (beta 1) instead of taking a pass of their own.
  void forward_accumulate(const Tensor& x, Tensor& y) const;
  // Returns dx = dy W (+ the adapter's part) and accumulates dW += dy^T x unless W is frozen.
  Tensor backward(Saved&& saved, const Tensor& dy) const;
  // dx += dy W, with the same parameter gradients: for layers whose input feeds several projections.
  void backward_accumulate(Saved&& saved, const Tensor& dy, Tensor& dx) const;

  // y = x W^T in the compute dtype and nothing more: no FP8 and no applied adapter (the fused decode layer's GEMMs).
  bool plain() const { return !fp8_ && !adapter_.active(); }
  Parameter& weight() const { return *weight_; }
  const LoraAdapter& adapter() const { return adapter_; }

 private:
  // lora_dx_beta 0: the adapter's part of dx overwrites dx.
  void parameter_grads(Saved saved, const Tensor& dy, Tensor& dx, float lora_dx_beta = 1.0f) const;
  bool fp8_applies(const Tensor& x) const;
  // dx (+)= dy W (beta 0 or 1), through FP8 when it applies.
  void input_grad(const Tensor& dy, Tensor& dx, float beta) const;

  Parameter* weight_;
  LoraAdapter adapter_;
  bool fp8_ = false;
};

}  // namespace veomni
