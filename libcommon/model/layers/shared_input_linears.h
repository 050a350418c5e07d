// Projections that read one input (attention's q/k/v, the MLP's gate/up) with their LoRA down-projections as one GEMM.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/tensor.h"
#include "model/layers/linear.h"

namespace veomni {

// With two or more active adapters, the stacked down-projections [A_1; A_2; ...] (a small copy of the [r, in]
// matrices per call) give every adapter's h^T = A_i x^T in one GEMM, h^T [R, N] with R the sum of the ranks, each
// adapter's rows contiguous; in backward one GEMM takes every dA_i and one adds every adapter's part of dx. The big
// input x [N, in] is then read once per pass instead of once per adapter. Fewer adapters run one by one (Linear).
// Holds pointers to the layer's projections: make one per call.
// [A_i; ...] of linears[i] for i in `which`, in that order: [R, in] in the adapters' dtype (a small copy of the
// [r, in] matrices).
Tensor stacked_lora_a(const std::vector<const Linear*>& linears, const std::vector<size_t>& which);

class SharedInputLinears {
 public:
  struct Saved {
    std::vector<Linear::Saved> parts;  // each projection's (without its adapter's when stacked)
    Tensor lora_ht;                    // the stacked h^T [R, N]; undefined when the adapters ran one by one
  };
  struct Output {
    std::vector<Tensor> out;  // each projection's y [N, out_i]
    Saved saved;
  };

  SharedInputLinears(std::initializer_list<const Linear*> linears) : linears_(linears) {}

  // x [N, in]; saved is empty unless save.
  Output forward(const Tensor& x, bool save) const;
  // dys[i] is projection i's output gradient; returns dx and accumulates the parameter gradients.
  Tensor backward(Saved&& saved, const std::vector<Tensor>& dys) const;

 private:
  // The projections whose adapters apply now, when there are at least two of them; else none.
  std::vector<size_t> stacked() const;
  // The rows of adapter `which[j]` in a stacked [R, ...] tensor.
  Tensor rows_of(const Tensor& stacked_rows, const std::vector<size_t>& which, size_t j) const;

  std::vector<const Linear*> linears_;
};

}  // namespace veomni
