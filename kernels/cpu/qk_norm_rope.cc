// CPU reference of qk_norm_rope_cache_write: the per-head RMSNorm, the rotation and the cache writes of a cached
// step's attention inputs, as the separate ops compute them in f32.
#include "kernels/cpu/ops_cpu.h"

namespace veomni::ops::cpu {
namespace {

// x [S, H, D] in place: RMSNorm of every head, then the rotation.
void norm_then_rotate(Tensor& x, const Tensor& weight, float eps, const Tensor& cos, const Tensor& sin) {
  const int64_t rows = x.dim(0) * x.dim(1), d = x.dim(2);
  const Tensor flat = x.view({rows, d});
  Tensor normed = Tensor::empty({rows, d}, DType::F32);
  Tensor rstd = Tensor::empty({rows}, DType::F32);
  rmsnorm_forward(flat, weight, eps, normed, rstd);
  Tensor heads = normed.view(x.shape());
  rope_apply(heads, cos, sin, false);
  x.copy_from(heads);
}

}  // namespace

void qk_norm_rope_cache_write(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm, const Tensor& k_norm,
                              float eps, const Tensor& cos, const Tensor& sin, const Tensor& dest, Tensor& k_cache,
                              Tensor& v_cache) {
  norm_then_rotate(q, q_norm, eps, cos, sin);
  norm_then_rotate(k, k_norm, eps, cos, sin);
  kv_cache_write(k, dest, k_cache);
  kv_cache_write(v, dest, v_cache);
}

}  // namespace veomni::ops::cpu
