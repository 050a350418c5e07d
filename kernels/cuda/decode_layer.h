// The persistent decode-layer kernel of ops::dense_decode_layer (decode_layer.cu): whether it is on, and whether it
// runs a layer's shapes.
#pragma once
#include "core/tensor.h"
#include "kernels/decode_layer.h"

namespace veomni::ops::cuda {

// VEOMNI_DECODE_LAYER_KERNEL=1: ops::dense_decode_layer runs the persistent kernel where it fits. Off by default: on
// an H100 the ops in turn, launched early, are faster (bench/RESULTS.md).
bool dense_decode_layer_kernel_enabled();

// Whether cuda::dense_decode_layer (kernels/decode_op_list.h) runs these operands as one kernel: bf16 rows of at most
// 8, bf16 16-byte aligned weights, gains and caches, head_dim 64 or 128 with 1, 2, 4 or 8 query heads per kv head, a
// Hopper GPU whose blocks' shared memory holds the layer's weight slices, VEOMNI_SKINNY_GEMM not 0.
bool dense_decode_layer_kernel_fits(const DenseDecodeLayer& layer, const Tensor& k_cache, const Tensor& v_cache,
                                    const Tensor& h);

}  // namespace veomni::ops::cuda
