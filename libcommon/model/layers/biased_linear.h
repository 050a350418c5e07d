// Linear layer with bias, y = x W^T + b, optionally over a block of rows of a fused weight (the qkv projection),
// with the LoRA adapter of its weight when it has one.
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "model/layers/lora_adapter.h"
#include "model/param.h"

namespace veomni {

class BiasedLinear {
 public:
  struct Saved {
    Tensor x;        // the forward input (a shared handle, no copy)
    Tensor lora_xa;  // x A^T of the adapter (undefined without an applied adapter)
  };
  struct Output {
    Tensor out;
    Saved saved;
  };

  // Uses rows [row_begin, row_end) of weight [out, in] and bias [out]; row_end = -1 means all rows. The rows are
  // taken from the parameters at each call, so FSDP may gather and release them between calls. The adapter is the
  // whole weight's: the layer uses its rows [row_begin, row_end) of B.
  BiasedLinear(Parameter* weight, Parameter* bias, int64_t row_begin = 0, int64_t row_end = -1,
               const LoraAdapter& adapter = {})
      : weight_(weight),
        bias_(bias),
        row_begin_(row_begin),
        row_end_(row_end),
        adapter_(row_begin == 0 && row_end < 0 ? adapter : adapter.rows(row_begin, row_end)) {}
  // Registers `{module}.weight` [out, in], its adapter when the store's LoRA settings target `module`, then
  // `{module}.bias` [out], in the store's current group.
  BiasedLinear(ParamStore& store, const std::string& module, int64_t out, int64_t in);

  // The layer over rows [begin, end) of this one's (whole) weight, bias and adapter.
  BiasedLinear row_block(int64_t begin, int64_t end) const {
    return BiasedLinear(weight_, bias_, begin, end, adapter_);
  }

  // x [N, in] -> [N, out]; saved is empty unless save.
  Output forward(const Tensor& x, bool save) const;
  // Returns dx = dy W (+ the adapter's part); accumulates dW += dy^T x and db += column sums of dy unless frozen.
  Tensor backward(Saved&& saved, const Tensor& dy) const;
  // dx += dy W, with the same parameter gradients: for inputs that feed several projections.
  void backward_accumulate(Saved&& saved, const Tensor& dy, Tensor& dx) const;

 private:
  Tensor rows(const Tensor& full) const;
  void parameter_grads(Saved saved, const Tensor& dy, Tensor& dx) const;

  Parameter* weight_;
  Parameter* bias_;
  int64_t row_begin_;
  int64_t row_end_;
  LoraAdapter adapter_;
};

}  // namespace veomni
