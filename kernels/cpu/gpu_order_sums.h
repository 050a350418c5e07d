// Host sums in the CUDA backend's order: what a GPU reduction would return for tensors that live in host memory.
#pragma once
#include <vector>

#include "core/tensor.h"

namespace veomni::ops::cpu {

// The sum of x^2 over f32 host tensors, added in the tree of the CUDA sum_squares_multi (kernels/cuda/
// multi_tensor.cu: one 256-thread block per 16Ki-element chunk, warp shuffles, then one 1024-thread block over the
// partials), so it is the same double, bit for bit, as that kernel on the same values. An offloaded run's gradient
// norm uses it, so that clipping scales exactly as it would with the gradients on the GPU.
double sum_squares_multi_gpu_order(const std::vector<const Tensor*>& xs);

}  // namespace veomni::ops::cpu
