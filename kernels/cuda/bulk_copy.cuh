// Bulk copies from global into shared memory (the Hopper copy engine, cp.async.bulk and cp.async.bulk.tensor)
// completing on an mbarrier: one thread queues a block's whole weight slice, and the block waits on the barrier's
// phase before reading it.
#pragma once
#include <cuda.h>

#include <cstdint>

namespace veomni::ops::cuda {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One arrival completes a phase (the thread that queues the copies), once their bytes have landed.
__device__ __forceinline__ void mbarrier_init(uint64_t* barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(barrier)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

// The arrival of the phase, expecting `bytes` of copies (0: the phase completes at once).
__device__ __forceinline__ void mbarrier_expect_bytes(uint64_t* barrier, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(barrier)), "r"(bytes)
               : "memory");
#endif
}

// Queues bytes (a multiple of 16; both addresses 16-byte aligned) from global src to shared dst.
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, uint32_t bytes, uint64_t* barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Shared memory that this block read through ordinary loads is rewritten by the copy engine: order them.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   shared_address(dst)),
               "l"(src), "r"(bytes), "r"(shared_address(barrier))
               : "memory");
#endif
}

// An L2 cache policy under which the lines a load brings in are the first evicted: for weights that a decode step
// streams once, so that they do not push out of L2 what the step reads again (the KV caches, say; which lines it
// spares was not measured, only the step's speed: bench/RESULTS.md).
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#endif
  return policy;
}

// bulk_copy_to_shared under an L2 cache policy (l2_evict_first_policy).
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, uint32_t bytes, uint64_t* barrier,
                                                    uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::
          "r"(shared_address(dst)),
      "l"(src), "r"(bytes), "r"(shared_address(barrier)), "l"(policy)
      : "memory");
#endif
}

// Queues the box of a 3-D tensor map (tensor_map.h) whose first element is at coordinates (c0, c1, c2), innermost
// first, into shared dst (128-byte aligned) in the box's row-major order. The map lives in kernel parameters (passed
// as __grid_constant__) or global memory.
__device__ __forceinline__ void tensor_copy_to_shared(void* dst, const CUtensorMap* map, int c0, int c1, int c2,
                                                      uint64_t* barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];" ::"r"(shared_address(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(shared_address(barrier))
      : "memory");
#endif
}

// tensor_copy_to_shared under an L2 cache policy (l2_evict_first_policy).
__device__ __forceinline__ void tensor_copy_to_shared(void* dst, const CUtensorMap* map, int c0, int c1, int c2,
                                                      uint64_t* barrier, uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, "
      "%3, %4}], [%5], %6;" ::"r"(shared_address(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(shared_address(barrier)), "l"(policy)
      : "memory");
#endif
}

// Waits until the barrier's phase of this parity (0 for its first phase, 1 for the second, ...) has completed. With
// kClusterScope its acquire is at cluster scope: what the cluster's other blocks stored into this block's shared memory
// on the phase (cluster_stores.cuh) is visible after it.
template <bool kClusterScope = false>
__device__ __forceinline__ void mbarrier_wait(uint64_t* barrier, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done = 0;
  while (!done) {
    if constexpr (kClusterScope)
      asm volatile(
          "{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2; "
          "selp.u32 %0, 1, 0, p; }"
          : "=r"(done)
          : "r"(shared_address(barrier)), "r"(parity)
          : "memory");
    else
      asm volatile(
          "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
          : "=r"(done)
          : "r"(shared_address(barrier)), "r"(parity)
          : "memory");
  }
#endif
}

}  // namespace veomni::ops::cuda
