// CUDA speech ops: one thread per output element (convolutions gather their terms: deterministic, no atomics), and
// sliding-window attention with one thread per (query, head) in two passes (max, then exp-sum and weighted values).
// Math in fp32; activations f32 or bf16.
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxHeadDim = 256;

__device__ __forceinline__ int64_t first_index() { return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

struct Conv1dShape {
  int64_t len, cin, cout, cg, kernel, stride, dilation, cout_per_group, pad_left, out_len;
};

__global__ void conv1d_kernel(ConstFloats x, ConstFloats w, ConstFloats b, bool has_bias, Conv1dShape s, Floats out) {
  const int64_t n = s.out_len * s.cout;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t o = i % s.cout, t = i / s.cout, c0 = (o / s.cout_per_group) * s.cg;
    float acc = has_bias ? b[o] : 0.0f;
    for (int64_t k = 0; k < s.kernel; ++k) {
      const int64_t src = t * s.stride + k * s.dilation - s.pad_left;
      if (src < 0 || src >= s.len) continue;
      for (int64_t c = 0; c < s.cg; ++c) acc += w[(o * s.cg + c) * s.kernel + k] * x[src * s.cin + c0 + c];
    }
    out.store(i, acc);
  }
}

struct TransConvShape {
  int64_t len, cin, cout, kernel, stride, trim_left, out_len;
};

__global__ void conv_transpose1d_kernel(ConstFloats x, ConstFloats w, ConstFloats b, bool has_bias, TransConvShape s,
                                        Floats out) {
  const int64_t n = s.out_len * s.cout;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t o = i % s.cout, pos = i / s.cout + s.trim_left;
    float acc = has_bias ? b[o] : 0.0f;
    for (int64_t k = pos % s.stride; k < s.kernel; k += s.stride) {
      const int64_t src = (pos - k) / s.stride;
      if (src < 0) break;
      if (src >= s.len) continue;
      for (int64_t c = 0; c < s.cin; ++c) acc += x[src * s.cin + c] * w[(c * s.cout + o) * s.kernel + k];
    }
    out.store(i, acc);
  }
}

__global__ void snake_beta_kernel(ConstFloats x, ConstFloats alpha, ConstFloats beta, Floats y, int64_t n,
                                  int64_t ch) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t c = i % ch;
    const float v = x[i], s = sinf(v * expf(alpha[c]));
    y.store(i, v + s * s / (expf(beta[c]) + 1e-9f));
  }
}

__global__ void scale_columns_kernel(Floats x, ConstFloats scale, int64_t n, int64_t ch) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) x.store(i, x[i] * scale[i % ch]);
}

__global__ void silu_kernel(ConstFloats x, Floats y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float v = x[i];
    y.store(i, v / (1.0f + expf(-v)));
  }
}

__global__ void sigmoid_gated_add_kernel(Floats dst, ConstFloats gate, ConstFloats src, int64_t n, int64_t d) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float g = 1.0f / (1.0f + expf(-gate[i / d]));
    dst.store(i, dst[i] + g * src[i]);
  }
}

__global__ void clamp_kernel(Floats x, float lo, float hi, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) x.store(i, fminf(fmaxf(x[i], lo), hi));
}

struct WindowShape {
  int64_t seq, hq, hkv, dim, window;
  float scale;
};

__global__ void sliding_window_attention_kernel(ConstFloats q, ConstFloats k, ConstFloats v, WindowShape s,
                                                Floats out) {
  const int64_t n = s.seq * s.hq;
  for (int64_t item = first_index(); item < n; item += grid_stride()) {
    const int64_t i = item / s.hq, h = item % s.hq, kvh = h / (s.hq / s.hkv);
    const int64_t first = i - s.window + 1 > 0 ? i - s.window + 1 : 0;
    const int64_t qbase = (i * s.hq + h) * s.dim;
    float top = -INFINITY;
    for (int64_t j = first; j <= i; ++j) {
      float dot = 0.0f;
      for (int64_t e = 0; e < s.dim; ++e) dot += q[qbase + e] * k[(j * s.hkv + kvh) * s.dim + e];
      top = fmaxf(top, dot * s.scale);
    }
    float acc[kMaxHeadDim];
    for (int64_t e = 0; e < s.dim; ++e) acc[e] = 0.0f;
    float total = 0.0f;
    for (int64_t j = first; j <= i; ++j) {
      float dot = 0.0f;
      for (int64_t e = 0; e < s.dim; ++e) dot += q[qbase + e] * k[(j * s.hkv + kvh) * s.dim + e];
      const float p = expf(dot * s.scale - top);
      total += p;
      for (int64_t e = 0; e < s.dim; ++e) acc[e] += p * v[(j * s.hkv + kvh) * s.dim + e];
    }
    for (int64_t e = 0; e < s.dim; ++e) out.store(qbase + e, acc[e] / total);
  }
}

}  // namespace

void conv1d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t dilation,
                    int64_t groups, int64_t pad_left, int64_t /*pad_right*/, Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const Conv1dShape s{x.dim(0),  x.dim(1), weight.dim(0), weight.dim(1),         weight.dim(2),
                      stride,    dilation, weight.dim(0) / groups, pad_left, out.dim(0)};
  conv1d_kernel<<<grid_for(n, kThreads), kThreads, 0, cuda_rt::stream()>>>(floats_of(x), floats_of(weight),
                                                                            floats_of(bias), bias.defined(), s,
                                                                            floats_of(out));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void conv_transpose1d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
                              int64_t trim_left, Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const TransConvShape s{x.dim(0), x.dim(1), weight.dim(1), weight.dim(2), stride, trim_left, out.dim(0)};
  conv_transpose1d_kernel<<<grid_for(n, kThreads), kThreads, 0, cuda_rt::stream()>>>(
      floats_of(x), floats_of(weight), floats_of(bias), bias.defined(), s, floats_of(out));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void snake_beta_forward(const Tensor& x, const Tensor& alpha, const Tensor& beta, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  snake_beta_kernel<<<grid_for(n, kThreads), kThreads, 0, cuda_rt::stream()>>>(
      floats_of(x), floats_of(alpha), floats_of(beta), floats_of(y), n, x.dim(1));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void scale_columns_(Tensor& x, const Tensor& scale) {
  const int64_t n = x.numel();
  if (n == 0) return;
  scale_columns_kernel<<<grid_for(n, kThreads), kThreads, 0, cuda_rt::stream()>>>(floats_of(x), floats_of(scale), n,
                                                                                   x.dim(1));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void silu_forward(const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  silu_kernel<<<grid_for(n, kThreads), kThreads, 0, cuda_rt::stream()>>>(floats_of(x), floats_of(y), n);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void sigmoid_gated_add_(Tensor& dst, const Tensor& gate, const Tensor& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  sigmoid_gated_add_kernel<<<grid_for(n, kThreads), kThreads, 0, cuda_rt::stream()>>>(
      floats_of(dst), floats_of(gate), floats_of(src), n, dst.dim(1));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void clamp_(Tensor& x, float lo, float hi) {
  const int64_t n = x.numel();
  if (n == 0) return;
  clamp_kernel<<<grid_for(n, kThreads), kThreads, 0, cuda_rt::stream()>>>(floats_of(x), lo, hi, n);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void sliding_window_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, int64_t window, float scale,
                                      Tensor& out) {
  const int64_t n = q.dim(0) * q.dim(1);
  if (n == 0) return;
  VEOMNI_CHECK(q.dim(2) <= kMaxHeadDim, "sliding_window_attention_forward: head_dim {} above the CUDA kernel's {}",
               q.dim(2), kMaxHeadDim);
  const WindowShape s{q.dim(0), q.dim(1), k.dim(1), q.dim(2), window, scale};
  sliding_window_attention_kernel<<<grid_for(n, 128), 128, 0, cuda_rt::stream()>>>(floats_of(q), floats_of(k),
                                                                                   floats_of(v), s, floats_of(out));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
