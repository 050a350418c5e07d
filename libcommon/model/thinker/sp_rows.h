// Row all-gather and reduce-scatter over the Ulysses group, built on its two all-to-alls (the vision tower's
// sequence-parallel output is gathered for the fill-back, and its gradient reduce-scattered back).
#pragma once
#include "core/tensor.h"
#include "model/parallel_hooks.h"

namespace veomni {

// x [n, D] on every rank of the group -> [P*n, D]: rank 0's rows, then rank 1's, ... (each row is sent once per
// rank as one "head" of seq_to_heads).
Tensor sp_gather_rows(SequenceHooks& hooks, const Tensor& x);
// y [P*n, D] on every rank -> [n, D]: the sum over the group of rows [rank*n, (rank+1)*n) (the adjoint of the
// gather).
Tensor sp_reduce_scatter_rows(SequenceHooks& hooks, const Tensor& y);

}  // namespace veomni
