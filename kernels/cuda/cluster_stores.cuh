// Stores into another block's shared memory that complete on that block's mbarrier (st.async, Hopper clusters): the
// receiver waits for the bytes it expects instead of a cluster barrier, whose arrive in every warp is a GPU-scope
// memory barrier (bench/RESULTS.md, "where its warps wait"). The receiver waits with mbarrier_wait<true>.
#pragma once
#include <cooperative_groups.h>

#include <cstdint>

#include "kernels/cuda/bulk_copy.cuh"

namespace veomni::ops::cuda {

// 16 bytes into `place` (this block's shared memory, 16-byte aligned) in block `rank` of the cluster, completing 16
// bytes of that block's `barrier` phase (the barrier at the same place as the local `barrier`).
__device__ __forceinline__ void store_to_cluster_block(uint4 value, uint4* place, uint64_t* barrier, int rank,
                                                       cooperative_groups::cluster_group& cluster) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t to = shared_address(cluster.map_shared_rank(place, rank));
  const uint32_t remote_barrier = shared_address(cluster.map_shared_rank(barrier, rank));
  asm volatile(
      "st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(to),
      "r"(value.x), "r"(value.y), "r"(value.z), "r"(value.w), "r"(remote_barrier)
      : "memory");
#endif
}

// 16 bytes of the block's shared memory at `local` to the same place in block `rank` of the cluster, completing
// 16 bytes of that block's `barrier` phase.
__device__ __forceinline__ void store_to_cluster_block(const uint4* local, uint64_t* barrier, int rank,
                                                       cooperative_groups::cluster_group& cluster) {
  store_to_cluster_block(*local, const_cast<uint4*>(local), barrier, rank, cluster);
}

// A float into `place` (this block's shared memory) in block `rank` of the cluster, completing 4 bytes of that
// block's `barrier` phase.
__device__ __forceinline__ void store_to_cluster_block(float value, float* place, uint64_t* barrier, int rank,
                                                       cooperative_groups::cluster_group& cluster) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t to = shared_address(cluster.map_shared_rank(place, rank));
  const uint32_t remote_barrier = shared_address(cluster.map_shared_rank(barrier, rank));
  asm volatile("st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(to),
               "r"(__float_as_uint(value)), "r"(remote_barrier)
               : "memory");
#endif
}

}  // namespace veomni::ops::cuda
