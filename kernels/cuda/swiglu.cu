// CUDA SwiGLU, split (gate, up) and fused (gate_up [N, 2I]) layouts, one thread per output element, math in fp32.
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

// Where element (r, c) of gate and up sit: separate [N, I] tensors (stride I, up_offset 0 into its own tensor) or
// halves of one [N, 2I] row (stride 2I, up at column I).
struct Layout {
  int64_t cols;    // I
  int64_t stride;  // row stride of gate/up
  int64_t up_offset;
  __device__ __forceinline__ int64_t at(int64_t idx) const { return (idx / cols) * stride + idx % cols; }
};

__global__ void forward_kernel(ConstFloats gate, ConstFloats up, Layout in, Floats out, int64_t n) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t at = in.at(idx);
    const float g = gate[at];
    out.store(idx, g * sigmoid(g) * up[at + in.up_offset]);
  }
}

// d silu(g)/dg = s * (1 + g * (1 - s)), s = sigmoid(g).
__global__ void backward_kernel(ConstFloats dout, ConstFloats gate, ConstFloats up, Layout in, Floats dgate, Floats dup,
                                int64_t n) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t at = in.at(idx);
    const float g = gate[at];
    const float u = up[at + in.up_offset];
    const float d = dout[idx];
    const float s = sigmoid(g);
    dgate.store(at, d * u * s * (1.0f + g * (1.0f - s)));
    dup.store(at + in.up_offset, d * g * s);
  }
}

void forward(ConstFloats gate, ConstFloats up, Layout in, Floats out, int64_t n) {
  if (n == 0) return;
  forward_kernel<<<grid_for(n, kThreads), kThreads, 0, cuda_rt::stream()>>>(gate, up, in, out, n);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void backward(ConstFloats dout, ConstFloats gate, ConstFloats up, Layout in, Floats dgate, Floats dup, int64_t n) {
  if (n == 0) return;
  backward_kernel<<<grid_for(n, kThreads), kThreads, 0, cuda_rt::stream()>>>(dout, gate, up, in, dgate, dup, n);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out) {
  const int64_t cols = std::max<int64_t>(gate.dim(1), 1);
  forward(floats_of(gate), floats_of(up), {cols, cols, 0}, floats_of(out), gate.numel());
}

void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup) {
  const int64_t cols = std::max<int64_t>(gate.dim(1), 1);
  backward(floats_of(dout), floats_of(gate), floats_of(up), {cols, cols, 0}, floats_of(dgate), floats_of(dup),
           gate.numel());
}

void swiglu_fused_forward(const Tensor& gate_up, Tensor& out) {
  const int64_t cols = std::max<int64_t>(out.dim(1), 1);
  const ConstFloats gu = floats_of(gate_up);
  forward(gu, gu, {cols, 2 * cols, cols}, floats_of(out), out.numel());
}

void swiglu_fused_backward(const Tensor& dout, const Tensor& gate_up, Tensor& dgate_up) {
  const int64_t cols = std::max<int64_t>(dout.dim(1), 1);
  const ConstFloats gu = floats_of(gate_up);
  const Floats dgu = floats_of(dgate_up);
  backward(floats_of(dout), gu, gu, {cols, 2 * cols, cols}, dgu, dgu, dout.numel());
}

}  // namespace veomni::ops::cuda
