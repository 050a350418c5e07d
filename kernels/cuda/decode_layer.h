// The persistent decode kernel of ops::dense_decode_layers (decode_layer.cu): whether it is on, and whether it runs
// a run of layers' shapes.
#pragma once
#include <vector>

#include "core/tensor.h"
#include "kernels/decode_layer.h"

namespace veomni::ops::cuda {

// VEOMNI_DECODE_LAYER_KERNEL=1: ops::dense_decode_layers runs the persistent kernel where it fits (bench/RESULTS.md
// compares it with the ops in turn).
bool dense_decode_layer_kernel_enabled();

// Whether cuda::dense_decode_layers (kernels/decode_op_list.h) runs these operands in the persistent kernel: layers
// of one shape, bf16 rows of at most 4, bf16 16-byte aligned weights, gains and caches, head_dim 64 or 128 with 1,
// 2, 4 or 8 query heads per kv head, at most 64 kv heads, a Hopper GPU whose blocks' shared memory holds a layer's
// weight slices, VEOMNI_SKINNY_GEMM not 0.
bool dense_decode_layers_kernel_fits(const std::vector<DenseDecodeLayer>& layers, const std::vector<Tensor>& k_caches,
                                     const std::vector<Tensor>& v_caches, const Tensor& h);

// How many shared-memory buffers the kernel's weight stream uses for these shapes (4: one per weight matrix; 3: o_proj
// and down share one; 2: q/k/v and gate|up share another), or 0 when it does not run them.
int dense_decode_layers_buffers(const DenseDecodeLayer& layer, const Tensor& h);

}  // namespace veomni::ops::cuda
