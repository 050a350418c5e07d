// A barrier across every block of a grid whose blocks are all resident at once (a persistent kernel sized from the
// occupancy): the blocks' writes before it are visible to every block after it. One counter in device memory, zero
// when a launch starts: each block adds one per barrier and waits until the count reaches the blocks times the
// barriers passed; at its end each block adds one more, and the last one out sets the count back to zero for the next
// launch (which waits for this one to end before its first barrier).
#pragma once
#include <cstdint>

namespace veomni::ops::cuda {

__device__ __forceinline__ unsigned load_relaxed(const unsigned* p) {
  unsigned value;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(value) : "l"(p) : "memory");
  return value;
}

__device__ __forceinline__ void fence_acq_rel() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

// The arrival half of the next barrier of this launch: every thread's writes before it are ordered before the
// block's arrival. `target` (the same in every thread, zero at the start) counts the arrivals the barrier waits for.
// Between grid_arrive and grid_wait a block may do work that no other block waits for (queue its next copies).
__device__ __forceinline__ void grid_arrive(unsigned* count, unsigned& target) {
  target += gridDim.x;
  __syncthreads();
  if (threadIdx.x == 0) {
    fence_acq_rel();  // the block's writes, ordered before by __syncthreads, before the arrival
    asm volatile("red.relaxed.gpu.global.add.u32 [%0], 1;" ::"l"(count) : "memory");
  }
}

// The waiting half: returns once every block has arrived, their writes before it visible to this block's reads.
__device__ __forceinline__ void grid_wait(const unsigned* count, unsigned target) {
  if (threadIdx.x == 0) {
    while (load_relaxed(count) < target) {
    }
    fence_acq_rel();  // the other blocks' writes before this block's reads
  }
  __syncthreads();
}

// The next barrier of this launch, whole.
__device__ __forceinline__ void grid_sync(unsigned* count, unsigned& target) {
  grid_arrive(count, target);
  grid_wait(count, target);
}

// The block's last use of the counter in this launch (after its last grid_sync).
__device__ __forceinline__ void grid_sync_exit(unsigned* count, unsigned target) {
  if (threadIdx.x == 0 && atomicAdd(count, 1u) == target + gridDim.x - 1) atomicExch(count, 0u);
}

}  // namespace veomni::ops::cuda
