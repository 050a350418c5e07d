// CUDA AdamW in the CPU backend's arithmetic (torch's _single_tensor_adamw): the scalar factors in double on the host
// from the decimals the user wrote, each tensor operation in fp32 with torch's operand order, every multiply and add
// rounded on its own (no fused multiply-add), so the GPU step matches the CPU step bit for bit on f32 tensors, and
// with bf16 moments or a compute copy (the conversions round to nearest even, as the CPU's and cast's do).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <charconv>
#include <cmath>
#include <type_traits>

#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/adamw_factors.h"
#include "kernels/cuda/multi_tensor.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace veomni::ops::cuda {
namespace {

using Factors = AdamWFactors;

// A slot without a compute copy.
struct NoCopy {};

__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T narrow(float x) {
  if constexpr (std::is_same_v<T, float>)
    return x;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(x);
  else
    return __float2half_rn(x);
}

// p *= 1 - lr*wd; m.lerp_(g, 1-b1); v = v*b2 + ((1-b2)*g)*g; p += step * m / (sqrt(v) / sqrt(bias2) + eps).
// torch's lerp(start, end, w) is start + w*(end - start) for |w| < 0.5, else end - (end - start)*(1 - w). The
// moments are stored as M (float, or bf16 rounded to nearest even when stored, the update reading what was stored);
// the updated parameter also goes, rounded, to the compute copy c (unless NoCopy). The CPU kernel's bits.
template <typename M, typename C>
__device__ __forceinline__ void adamw_element(float* p, float gi, M* m, M* v, C* c, int64_t i, const Factors& f,
                                              float decay, bool small_weight) {
  const float w = f.one_minus_beta1;
  const float one_minus_w = __fsub_rn(1.0f, w);
  const float m0 = widen(m[i]);
  const float mi = small_weight ? __fadd_rn(m0, __fmul_rn(w, __fsub_rn(gi, m0)))
                                : __fsub_rn(gi, __fmul_rn(__fsub_rn(gi, m0), one_minus_w));
  const float vi = __fadd_rn(__fmul_rn(widen(v[i]), f.beta2), __fmul_rn(__fmul_rn(f.one_minus_beta2, gi), gi));
  const M ms = narrow<M>(mi);
  const M vs = narrow<M>(vi);
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(widen(vs)), f.bias2_sqrt), f.eps);
  m[i] = ms;
  v[i] = vs;
  const float pi = __fadd_rn(__fmul_rn(p[i], decay), __fdiv_rn(__fmul_rn(f.neg_step_size, widen(ms)), denom));
  p[i] = pi;
  if constexpr (!std::is_same_v<C, NoCopy>) c[i] = narrow<C>(pi);
}

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, Factors f, bool small_weight) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    adamw_element(p, g[i], m, v, static_cast<NoCopy*>(nullptr), i, f, f.decay, small_weight);
}

// One parameter of adamw_step_multi: its tensors (moments and compute copy typed by the kernel instance), size and
// own 1 - lr*wd.
struct AdamWEntry {
  float* p;
  const float* g;
  void* m;
  void* v;
  void* c;
  int64_t n;
  float decay;
};

// One CTA per chunk; the gradient is scaled as scale_ would (one f32 multiply, exact for a scale of 1).
template <typename M, typename C>
__global__ void adamw_multi_kernel(TableView<AdamWEntry> table, Factors f, float grad_scale, bool small_weight) {
  const ChunkRange r = chunk_range(table.first_chunk, table.num_tensors, blockIdx.x);
  const AdamWEntry e = table.entries[r.tensor];
  const int64_t end = r.end < e.n ? r.end : e.n;
  M* m = static_cast<M*>(e.m);
  M* v = static_cast<M*>(e.v);
  C* c = static_cast<C*>(e.c);
  for (int64_t i = r.begin + threadIdx.x; i < end; i += blockDim.x)
    adamw_element(e.p, __fmul_rn(e.g[i], grad_scale), m, v, c, i, f, e.decay, small_weight);
}

template <typename M, typename C>
void launch_multi(const DeviceTable<AdamWEntry>& table, const Factors& f, float grad_scale) {
  constexpr int kThreads = 256;
  adamw_multi_kernel<M, C><<<static_cast<unsigned>(table.num_chunks), kThreads, 0, cuda_rt::stream()>>>(
      table.view(), f, grad_scale, std::fabs(f.one_minus_beta1) < 0.5f);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

template <typename M>
void launch_with_copy(const DeviceTable<AdamWEntry>& table, const Factors& f, float grad_scale, const Tensor* copy) {
  if (!copy)
    launch_multi<M, NoCopy>(table, f, grad_scale);
  else if (copy->dtype() == DType::BF16)
    launch_multi<M, __nv_bfloat16>(table, f, grad_scale);
  else
    launch_multi<M, __half>(table, f, grad_scale);
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

void adamw_step_multi(const std::vector<AdamWTensors>& slots, double lr, double beta1, double beta2, double eps,
                      int64_t step, float grad_scale) {
  std::vector<AdamWEntry> entries;
  std::vector<int64_t> sizes;
  for (const AdamWTensors& s : slots) {
    const float decay = adamw_factors(lr, beta1, beta2, eps, s.weight_decay, step).decay;
    entries.push_back({data_of<float>(*s.param), data_of<float>(*s.grad), s.exp_avg->raw_data(),
                       s.exp_avg_sq->raw_data(), s.compute ? s.compute->raw_data() : nullptr, s.param->numel(),
                       decay});
    sizes.push_back(s.param->numel());
  }
  const DeviceTable<AdamWEntry> table = upload_table(entries, sizes, slots.front().param->device());
  if (table.num_chunks == 0) return;
  VEOMNI_CHECK(table.num_chunks <= INT32_MAX, "adamw_step_multi: {} chunks exceed the grid", table.num_chunks);
  const Factors f = adamw_factors(lr, beta1, beta2, eps, 0.0, step);
  // ops::adamw_step_multi checked that every slot has the first one's moment and compute-copy dtypes.
  const Tensor* copy = slots.front().compute;
  if (slots.front().exp_avg->dtype() == DType::BF16)
    launch_with_copy<__nv_bfloat16>(table, f, grad_scale, copy);
  else
    launch_with_copy<float>(table, f, grad_scale, copy);
}

}  // namespace veomni::ops::cuda
