// Tensor maps (the descriptors of Hopper's tensor copies, cp.async.bulk.tensor) of bf16 matrices, encoded on the host
// through the driver's entry point: the runtime library we link hands it out, so libcuda is not linked.
#pragma once
#include <cuda.h>

#include <array>
#include <cstdint>

namespace veomni::ops::cuda {

// Whether this process's driver encodes tensor maps.
bool tensor_maps_available();

// The map of a 3-D view of bf16 elements at base (16-byte aligned): dims[0] contiguous elements, then dims[1] and
// dims[2] at strides[0] and strides[1] bytes (multiples of 16); one copy moves a box of box[0] x box[1] x box[2]
// elements (each 1 to 256, box[0] two-byte elements a multiple of 16 bytes) into shared memory in that order, with
// no swizzle. Throws with the driver's code on a shape it refuses.
CUtensorMap bf16_tensor_map(const void* base, std::array<uint64_t, 3> dims, std::array<uint64_t, 2> strides,
                            std::array<uint32_t, 3> box);

}  // namespace veomni::ops::cuda
