// CPU reference of qkv_norm_rope_cache_write: the packed projections unpacked into q, k and v, then the per-head
// RMSNorm, the rotation and the cache writes, as the separate ops compute them in f32.
#include "kernels/cpu/ops_cpu.h"

#include <cstring>

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

// Columns [first, first + out's row width) of every row of qkv into out.
void unpack(const Tensor& qkv, int64_t first, Tensor& out) {
  const int64_t s = qkv.dim(0), width = out.numel() / s, total = qkv.dim(1);
  const float* src = qkv.data<float>();
  float* dst = out.data<float>();
  for (int64_t t = 0; t < s; ++t)
    std::memcpy(dst + t * width, src + t * total + first, static_cast<size_t>(width) * sizeof(float));
}

}  // namespace

void qkv_norm_rope_cache_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                               const Tensor& cos, const Tensor& sin, const Tensor& dest, Tensor& q, Tensor& k,
                               Tensor& v, Tensor& k_cache, Tensor& v_cache) {
  if (q.dim(0) == 0) return;
  const int64_t q_width = q.numel() / q.dim(0), kv_width = k.numel() / k.dim(0);
  unpack(qkv, 0, q);
  unpack(qkv, q_width, k);
  unpack(qkv, q_width + kv_width, v);
  norm_then_rotate(q, q_norm, eps, cos, sin);
  norm_then_rotate(k, k_norm, eps, cos, sin);
  kv_cache_write(k, dest, k_cache);
  kv_cache_write(v, dest, v_cache);
}

}  // namespace veomni::ops::cpu
