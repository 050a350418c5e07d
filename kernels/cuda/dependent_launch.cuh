// Programmatic dependent launch for the kernels of the decode path: the device side (wait for the kernel before, let
// the kernel after launch) and the host side (a launch that asks for it inside an OverlappedLaunches scope).
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/runtime.h"
#include "kernels/overlapped_launches.h"

namespace veomni::ops::cuda {

// Waits until the kernel queued before this one has finished and its writes are visible here (returns at once when
// this kernel was launched normally). A kernel launched through launch_overlapped calls it on every path, early
// returns included, before it writes anything or reads anything but weights: a grid whose blocks all returned before
// waiting would count as finished while its predecessor still runs.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the kernel queued after this one launch as soon as every block of this one has started; its own wait still
// orders its reads after this kernel's end.
__device__ __forceinline__ void let_next_kernel_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Queues kernel<<<grid, block, shared_bytes, stream()>>>(args...), allowed to start early (before the previous kernel
// on the stream ends) while an OverlappedLaunches scope is active on this thread; a normal launch otherwise. The
// kernel must follow wait_for_previous_kernel's rule.
template <typename... Params, typename... Args>
void launch_overlapped(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = cuda_rt::stream();
  cudaLaunchAttribute early = {};
  early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early.val.programmaticStreamSerializationAllowed = 1;
  if (OverlappedLaunches::active()) {
    config.attrs = &early;
    config.numAttrs = 1;
  }
  VEOMNI_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace veomni::ops::cuda
