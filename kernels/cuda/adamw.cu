// CUDA AdamW in the CPU backend's arithmetic (torch's _single_tensor_adamw): the scalar factors in double on the host
// from the decimals the user wrote, each tensor operation in fp32 with torch's operand order, every multiply and add
// rounded on its own (no fused multiply-add), so the GPU step matches the CPU step bit for bit on f32 tensors.
#include <charconv>
#include <cmath>

#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace veomni::ops::cuda {
namespace {

// The shortest decimal that round-trips the float: 0.999f is 0.99900001287, the user wrote 0.999.
double decimal_value(float v) {
  char buf[32];
  const auto printed = std::to_chars(buf, buf + sizeof buf, v);
  double out = v;
  std::from_chars(buf, printed.ptr, out);
  return out;
}

struct Factors {
  float decay, one_minus_beta1, beta2, one_minus_beta2, bias2_sqrt, eps, neg_step_size;
};

Factors factors(float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step) {
  const double lr_d = decimal_value(lr);
  const double b1 = decimal_value(beta1);
  const double b2 = decimal_value(beta2);
  const double t = static_cast<double>(step);
  const double bias1 = 1.0 - std::pow(b1, t);
  const double bias2 = 1.0 - std::pow(b2, t);
  return {static_cast<float>(1.0 - lr_d * decimal_value(weight_decay)),
          static_cast<float>(1.0 - b1),
          static_cast<float>(b2),
          static_cast<float>(1.0 - b2),
          static_cast<float>(std::sqrt(bias2)),
          static_cast<float>(decimal_value(eps)),
          static_cast<float>(-(lr_d / bias1))};
}

// p *= 1 - lr*wd; m.lerp_(g, 1-b1); v = v*b2 + ((1-b2)*g)*g; p += step * m / (sqrt(v) / sqrt(bias2) + eps).
// torch's lerp(start, end, w) is start + w*(end - start) for |w| < 0.5, else end - (end - start)*(1 - w).
__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, Factors f, bool small_weight) {
  const float w = f.one_minus_beta1;
  const float one_minus_w = __fsub_rn(1.0f, w);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float gi = g[i];
    const float m0 = m[i];
    const float mi = small_weight ? __fadd_rn(m0, __fmul_rn(w, __fsub_rn(gi, m0)))
                                  : __fsub_rn(gi, __fmul_rn(__fsub_rn(gi, m0), one_minus_w));
    const float vi = __fadd_rn(__fmul_rn(v[i], f.beta2), __fmul_rn(__fmul_rn(f.one_minus_beta2, gi), gi));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), f.bias2_sqrt), f.eps);
    m[i] = mi;
    v[i] = vi;
    p[i] = __fadd_rn(__fmul_rn(p[i], f.decay), __fdiv_rn(__fmul_rn(f.neg_step_size, mi), denom));
  }
}

}  // namespace

void adamw_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, float lr, float beta1,
                float beta2, float eps, float weight_decay, int64_t step) {
  const int64_t n = param.numel();
  if (n == 0) return;
  const Factors f = factors(lr, beta1, beta2, eps, weight_decay, step);
  constexpr int kThreads = 256;
  adamw_kernel<<<grid_for(n, kThreads), kThreads, 0, cuda_rt::stream()>>>(
      data_of<float>(param), data_of<float>(grad), data_of<float>(exp_avg), data_of<float>(exp_avg_sq), n, f,
      std::fabs(f.one_minus_beta1) < 0.5f);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
