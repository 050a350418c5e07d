// CPU reference of the ops on packed q/k/v projections (qkv_norm_rope_cache_write, qkv_norm_rope_forward and its
// backward): the packed columns unpacked into q, k and v (or packed back), then the per-head RMSNorm, the rotation and
// the cache writes (or their backwards), as the separate ops compute them in f32.
#include "kernels/cpu/ops_cpu.h"

#include <cstring>

namespace veomni::ops::cpu {
namespace {

// x [S, H, D] in place: RMSNorm of every head (its rstd [S * H] into rstd), then the rotation.
void norm_then_rotate(Tensor& x, const Tensor& weight, float eps, const Tensor& cos, const Tensor& sin, Tensor& rstd) {
  const int64_t rows = x.dim(0) * x.dim(1), d = x.dim(2);
  const Tensor flat = x.view({rows, d});
  Tensor normed = Tensor::empty({rows, d}, DType::F32);
  rmsnorm_forward(flat, weight, eps, normed, rstd);
  Tensor heads = normed.view(x.shape());
  rope_apply(heads, cos, sin, false);
  x.copy_from(heads);
}

void norm_then_rotate(Tensor& x, const Tensor& weight, float eps, const Tensor& cos, const Tensor& sin) {
  Tensor rstd = Tensor::empty({x.dim(0) * x.dim(1)}, DType::F32);
  norm_then_rotate(x, weight, eps, cos, sin, rstd);
}

// dx [S, H, D] from the gradient dy of the rotated, normalised heads: the inverse rotation, then the norm's backward
// (no weight gradient) at the forward's input x and rstd.
Tensor unrotate_then_unnorm(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                            const Tensor& cos, const Tensor& sin) {
  Tensor du = dy.clone();
  rope_apply(du, cos, sin, true);
  const int64_t rows = x.dim(0) * x.dim(1), d = x.dim(2);
  Tensor dx = Tensor::empty(x.shape(), DType::F32);
  Tensor dx_flat = dx.view({rows, d});
  Tensor no_weight_grad;
  rmsnorm_backward(du.view({rows, d}), x.view({rows, d}), weight, rstd, dx_flat, no_weight_grad, Tensor());
  return dx;
}

// Columns [first, first + out's row width) of every row of qkv into out.
void unpack(const Tensor& qkv, int64_t first, Tensor& out) {
  const int64_t s = qkv.dim(0), width = out.numel() / s, total = qkv.dim(1);
  const float* src = qkv.data<float>();
  float* dst = out.data<float>();
  for (int64_t t = 0; t < s; ++t)
    std::memcpy(dst + t * width, src + t * total + first, static_cast<size_t>(width) * sizeof(float));
}

// part's rows into columns [first, first + part's row width) of every row of qkv: unpack's inverse.
void pack(const Tensor& part, int64_t first, Tensor& qkv) {
  const int64_t s = qkv.dim(0), width = part.numel() / s, total = qkv.dim(1);
  const float* src = part.data<float>();
  float* dst = qkv.data<float>();
  for (int64_t t = 0; t < s; ++t)
    std::memcpy(dst + t * total + first, src + t * width, static_cast<size_t>(width) * sizeof(float));
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

void qkv_norm_rope_forward(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps, const Tensor& cos,
                           const Tensor& sin, Tensor& q, Tensor& k, Tensor& v, Tensor& q_rstd, Tensor& k_rstd) {
  if (q.dim(0) == 0) return;
  const int64_t q_width = q.numel() / q.dim(0), kv_width = k.numel() / k.dim(0);
  unpack(qkv, 0, q);
  unpack(qkv, q_width, k);
  unpack(qkv, q_width + kv_width, v);
  norm_then_rotate(q, q_norm, eps, cos, sin, q_rstd);
  norm_then_rotate(k, k_norm, eps, cos, sin, k_rstd);
}

void qkv_norm_rope_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& qkv,
                            const Tensor& q_norm, const Tensor& k_norm, const Tensor& q_rstd, const Tensor& k_rstd,
                            const Tensor& cos, const Tensor& sin, Tensor& dqkv) {
  if (dq.dim(0) == 0) return;
  const int64_t q_width = dq.numel() / dq.dim(0), kv_width = dk.numel() / dk.dim(0);
  Tensor q = Tensor::empty(dq.shape(), DType::F32), k = Tensor::empty(dk.shape(), DType::F32);
  unpack(qkv, 0, q);
  unpack(qkv, q_width, k);
  pack(unrotate_then_unnorm(dq, q, q_norm, q_rstd, cos, sin), 0, dqkv);
  pack(unrotate_then_unnorm(dk, k, k_norm, k_rstd, cos, sin), q_width, dqkv);
  pack(dv, q_width + kv_width, dqkv);
}

}  // namespace veomni::ops::cpu
