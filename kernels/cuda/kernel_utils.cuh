// Device-side helpers shared by the CUDA kernel files: f32/bf16 element views chosen at run time, warp and block
// reductions, launch sizing and the launch check.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/tensor.h"
#include "kernels/cuda/runtime.h"

// Checks the launch that was just queued (bad configuration, missing kernel image for this GPU).
#define VEOMNI_CUDA_LAUNCH_CHECK() VEOMNI_CUDA_CHECK(cudaGetLastError())

namespace veomni::ops::cuda {

inline constexpr int kWarp = 32;

// Read-only view of an f32 or bf16 tensor: elements load as float. The dtype is a run-time flag that is the same for
// every thread, so the branch costs nothing measurable next to the memory access; one kernel serves every mix of
// dtypes the op API allows.
struct ConstFloats {
  const void* data = nullptr;
  bool bf16 = false;

  __device__ __forceinline__ float operator[](int64_t i) const {
    return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(data)[i]) : static_cast<const float*>(data)[i];
  }
};

// Writable view of an f32 or bf16 tensor: stores round to nearest even into bf16.
struct Floats {
  void* data = nullptr;
  bool bf16 = false;

  __device__ __forceinline__ float operator[](int64_t i) const {
    return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(data)[i]) : static_cast<const float*>(data)[i];
  }
  __device__ __forceinline__ void store(int64_t i, float v) const {
    if (bf16)
      static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16_rn(v);
    else
      static_cast<float*>(data)[i] = v;
  }
  operator ConstFloats() const { return {data, bf16}; }
};

inline ConstFloats floats_of(const Tensor& t) { return {t.defined() ? t.raw_data() : nullptr, t.dtype() == DType::BF16}; }
inline Floats floats_of(Tensor& t) { return {t.defined() ? t.raw_data() : nullptr, t.dtype() == DType::BF16}; }

template <typename T>
T* data_of(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

// Blocks for a grid-stride loop over n items: enough to fill the GPU several times over, never more than needed.
inline unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 132 * 32));
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result. `scratch` holds 32
// values; the tree is fixed, so the result does not depend on timing.
template <typename T>
__device__ T block_sum(T v, T* scratch) {
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : T(0);
  return warp_sum(v);
}

// *total = the sum of count per-block partial sums, by one CTA in a fixed order (the same double every run). A
// template so that every kernel file can launch it from this header.
template <typename T>
__global__ void sum_of_partials(const T* partial, int64_t count, T* total) {
  __shared__ T scratch[kWarp];
  T acc = T(0);
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) *total = acc;
}

}  // namespace veomni::ops::cuda
