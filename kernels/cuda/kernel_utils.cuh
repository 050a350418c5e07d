// Device-side helpers shared by the CUDA kernel files: f32/bf16 element views chosen at run time, typed 16-byte
// loads and stores, warp and block reductions, launch sizing and the launch check.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

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

// ---------------------------------------------------------------- typed 16-byte access
//
// The fast paths of the memory-bound kernels pick the element type once per launch on the host and move 16 bytes per
// load or store (LDG.128/STG.128: 8 bf16 or 4 f32), the widest access a thread has; the ConstFloats/Floats views above
// stay the fallback for sizes and views those paths cannot take. The names live in their own namespace because
// several kernel files define their own to_float / Vec in anonymous namespaces.
namespace packed {

// Elements in 16 bytes of T.
template <typename T>
inline constexpr int kPer16 = 16 / static_cast<int>(sizeof(T));

// P consecutive elements moved by one access (alignas makes the compiler emit one vector instruction).
template <typename T, int P>
struct alignas(sizeof(T) * P) Pack {
  T v[P];
};

__device__ __forceinline__ float as_float(float v) { return v; }
__device__ __forceinline__ float as_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// Round to nearest even into T.
template <typename T>
__device__ __forceinline__ T rounded(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else
    return __float2bfloat16_rn(v);
}

// Accesses of at most 16 bytes: P elements of a 4-byte type next to P of a 2-byte one take two 16-byte or one 8-byte
// access.
template <typename T, int P>
inline constexpr int kChunk = P * static_cast<int>(sizeof(T)) <= 16 ? P : kPer16<T>;

// out[j] = p[j] for j < P; p aligned to kChunk<T, P> elements.
template <typename T, int P>
__device__ __forceinline__ void load(const T* p, float (&out)[P]) {
  constexpr int kC = kChunk<T, P>;
#pragma unroll
  for (int c = 0; c < P / kC; ++c) {
    const Pack<T, kC> v = reinterpret_cast<const Pack<T, kC>*>(p)[c];
#pragma unroll
    for (int j = 0; j < kC; ++j) out[c * kC + j] = as_float(v.v[j]);
  }
}

// p[j] = in[j] rounded to T for j < P; p aligned to kChunk<T, P> elements.
template <typename T, int P>
__device__ __forceinline__ void store(T* p, const float (&in)[P]) {
  constexpr int kC = kChunk<T, P>;
#pragma unroll
  for (int c = 0; c < P / kC; ++c) {
    Pack<T, kC> v;
#pragma unroll
    for (int j = 0; j < kC; ++j) v.v[j] = rounded<T>(in[c * kC + j]);
    reinterpret_cast<Pack<T, kC>*>(p)[c] = v;
  }
}

// Every tensor a fast path touches must start on a 16-byte boundary (slices of a buffer may not).
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Calls f with a value of the C++ element type of an activation dtype: float for f32, __nv_bfloat16 for bf16.
template <typename F>
void with_float_type(DType dtype, F&& f) {
  if (dtype == DType::BF16)
    f(__nv_bfloat16{});
  else
    f(float{});
}

// Sum over aligned groups of kLanes lanes (a power of two, at most 32); every lane of the warp must call it, and each
// gets its group's sum. The xor tree is fixed, so the result does not depend on timing.
template <int kLanes>
__device__ __forceinline__ float group_sum(float v) {
  static_assert(kLanes >= 1 && kLanes <= kWarp && (kLanes & (kLanes - 1)) == 0);
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

}  // namespace packed

}  // namespace veomni::ops::cuda
