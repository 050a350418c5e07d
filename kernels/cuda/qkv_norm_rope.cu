// CUDA qkv_norm_rope_cache_write: one warp per (token, head) of the packed q/k/v projections. A query or key head is
// read once into shared memory, normalised (its sum of squares a warp sum) and rotated in fp32, then stored once: into
// q, or into k and its cache row; a value head is copied into v and its cache row. One launch instead of the q/k
// RMSNorms, rotations and cache writes (six per layer).
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/qkv_norm_rope.cuh"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {
namespace {

__global__ void __launch_bounds__(kQkvNormRopeWarps* kWarp) qkv_norm_rope_kernel(QkvNormRopeArgs a) {
  __shared__ float head[kQkvNormRopeWarps][kMaxHeadDim];
  let_next_kernel_launch();
  wait_for_previous_kernel();
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t h = static_cast<int64_t>(blockIdx.x) * kQkvNormRopeWarps + warp;
  if (h >= a.hq + 2 * a.hkv) return;
  qkv_norm_rope_head(a, blockIdx.y, h, head[warp], lane);
}

}  // namespace

void qkv_norm_rope_cache_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                               const Tensor& cos, const Tensor& sin, const Tensor& dest, Tensor& q, Tensor& k,
                               Tensor& v, Tensor& k_cache, Tensor& v_cache) {
  const int64_t s = q.dim(0), hq = q.dim(1), d = q.dim(2), hkv = k.dim(1);
  if (s == 0) return;
  VEOMNI_CHECK(d <= kMaxHeadDim, "qkv_norm_rope_cache_write: head_dim {} is above {}", d, kMaxHeadDim);
  const QkvNormRopeArgs args =
      qkv_norm_rope_args(qkv, q_norm, k_norm, eps, cos, sin, dest, q, k, v, k_cache, v_cache);
  const int64_t heads = hq + 2 * hkv;
  const dim3 grid(static_cast<unsigned>((heads + kQkvNormRopeWarps - 1) / kQkvNormRopeWarps), static_cast<unsigned>(s));
  launch_overlapped(qkv_norm_rope_kernel, grid, dim3(kQkvNormRopeWarps * kWarp), 0, args);
}

}  // namespace veomni::ops::cuda
