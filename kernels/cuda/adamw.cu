// CUDA AdamW in the CPU backend's arithmetic (torch's _single_tensor_adamw): the scalar factors in double on the host
// from the decimals the user wrote, each tensor operation in fp32 with torch's operand order, every multiply and add
// rounded on its own (no fused multiply-add), so the GPU step matches the CPU step bit for bit on f32 tensors.
#include <charconv>
#include <cmath>

#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/adamw_factors.h"
#include "kernels/cuda/ops_cuda.h"

namespace veomni::ops::cuda {
namespace {

using Factors = AdamWFactors;

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

void adamw_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, double lr, double beta1,
                double beta2, double eps, double weight_decay, int64_t step) {
  const int64_t n = param.numel();
  if (n == 0) return;
  const Factors f = adamw_factors(lr, beta1, beta2, eps, weight_decay, step);
  constexpr int kThreads = 256;
  adamw_kernel<<<grid_for(n, kThreads), kThreads, 0, cuda_rt::stream()>>>(
      data_of<float>(param), data_of<float>(grad), data_of<float>(exp_avg), data_of<float>(exp_avg_sq), n, f,
      std::fabs(f.one_minus_beta1) < 0.5f);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
