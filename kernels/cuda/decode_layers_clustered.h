// The clustered decode kernel of ops::dense_decode_layers (decode_layers_clustered.cu): whether it is on, and whether
// it runs a run of layers' shapes.
#pragma once
#include <vector>

#include "core/tensor.h"
#include "kernels/decode_layer.h"

namespace veomni::ops::cuda {

// Whether ops::dense_decode_layers runs the clustered kernel where it fits: by default, and with
// VEOMNI_DECODE_LAYER_KERNEL=2; not with 0 (the ops in turn) or 1 (decode_layer.h's persistent kernel).
bool dense_decode_layers_clustered_enabled();

// Whether the clustered kernel runs these operands: one row, layers of one shape, head_dim 128 with 1, 2 or 4 query
// heads per kv head, caches of at most 2,048 positions, a hidden size that is a multiple of 64 up to 1,024, bf16
// 16-byte aligned weights, gains, caches and h, a driver that encodes tensor maps, and a Hopper GPU on which a cluster
// of eight blocks a kv head (and more for the MLP) can all be resident with their weight slices in shared memory.
bool dense_decode_layers_clustered_fits(const std::vector<DenseDecodeLayer>& layers,
                                        const std::vector<Tensor>& k_caches, const std::vector<Tensor>& v_caches,
                                        const Tensor& h);

// ops::dense_decode_layers (kernels/decode_op_list.h) in the clustered kernel, for operands it fits. h differs from
// the ops' in its last bits: its sums run on the tensor cores in another order.
void dense_decode_layers_clustered(const std::vector<DenseDecodeLayer>& layers, const Tensor& cos, const Tensor& sin,
                                   const Tensor& write_rows, const Tensor& cache_rows, std::vector<Tensor>& k_caches,
                                   std::vector<Tensor>& v_caches, Tensor& h);

}  // namespace veomni::ops::cuda
