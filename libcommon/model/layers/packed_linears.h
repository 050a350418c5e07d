// Frozen projections that read one input and whose weights are consecutive rows of one tensor, run as one GEMM with
// their outputs side by side (Attention's q/k/v under LoRA), their adapters' up-projections as one GEMM too.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/tensor.h"
#include "model/layers/linear.h"

namespace veomni {

// y = x [W_1; W_2; ...]^T [N, sum of outs]: projection i's output in its block of columns. The active adapters' h^T =
// [A_1; A_2; ...] x^T [R, N] is one GEMM as in SharedInputLinears, and their up-projections one more, through the
// block-diagonal [sum of outs, R] that holds B_i at projection i's rows and adapter i's columns (zeros elsewhere;
// built by the forward from the B's, a few hundred KB, and kept for the backward). Backward takes the packed dy, so
// each pass reads it once. Holds pointers to the layer's projections: make one per call.
class PackedLinears {
 public:
  struct Saved {
    Tensor x;   // the forward input
    Tensor ht;  // the stacked h^T [R, N]; undefined without an active adapter
    Tensor a;   // the stacked A's [R, in] and the block-diagonal B [sum of outs, R] the forward used
    Tensor b;
  };
  struct Output {
    Tensor out;  // [N, sum of outs]
    Saved saved;
  };

  // The projections' joined weight (Tensor::join_rows of their values), or undefined when their weights are not
  // consecutive rows of one tensor, or when a weight is trainable or takes FP8 GEMMs for x: the projections must then
  // run on their own.
  static Tensor joined_weight(std::initializer_list<const Linear*> linears, const Tensor& x);

  // weight: joined_weight's tensor for these projections.
  PackedLinears(Tensor weight, std::initializer_list<const Linear*> linears);

  // x [N, in]; saved is empty unless save.
  Output forward(const Tensor& x, bool save) const;
  // dy [N, sum of outs]; returns dx and accumulates the adapters' gradients.
  Tensor backward(Saved&& saved, const Tensor& dy) const;

 private:
  std::vector<size_t> adapted() const;  // the projections whose adapters apply now
  // The block-diagonal [sum of outs, R] of their B's.
  Tensor block_b(const std::vector<size_t>& which) const;

  Tensor weight_;
  std::vector<const Linear*> linears_;
  std::vector<int64_t> row_offsets_;  // projection i's first output column
};

}  // namespace veomni
