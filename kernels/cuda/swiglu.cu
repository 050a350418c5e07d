// CUDA SwiGLU, split (gate, up) and fused (gate_up [N, 2I]) layouts, 16-byte packs of outputs per thread (one
// element per thread on the fallback path), math in fp32.
#include <limits>

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


// ---------------------------------------------------------------- vector path
//
// Each thread moves one 16-byte pack of the output (8 bf16 or 4 f32) and the matching packs of gate and up. Taken
// when every tensor has one dtype and starts 16-byte aligned, I is a whole number of packs (a pack never straddles
// rows) and the pack count fits 32 bits, so the fused layout's row is one 32-bit division per pack instead of a
// 64-bit division per element.

// Pack q of an [N, I] tensor sits at pack q + (q / row_packs) * row_packs of the fused [N, 2I] gate_up (gate half; the
// up half is row_packs further on) and at pack q of a split gate or up.
template <bool kFused>
__device__ __forceinline__ uint32_t input_pack(uint32_t q, uint32_t row_packs) {
  if constexpr (kFused)
    return q + q / row_packs * row_packs;
  else
    return q;
}

template <typename T, bool kFused>
__global__ void forward_packed(const T* gate, const T* up, T* out, uint32_t packs, uint32_t row_packs) {
  constexpr int P = packed::kPer16<T>;
  const uint32_t up_offset = kFused ? row_packs : 0;
  for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < packs; q += gridDim.x * blockDim.x) {
    const uint32_t at = input_pack<kFused>(q, row_packs);
    float g[P], u[P], o[P];
    packed::load<T, P>(gate + static_cast<size_t>(at) * P, g);
    packed::load<T, P>(up + static_cast<size_t>(at + up_offset) * P, u);
#pragma unroll
    for (int j = 0; j < P; ++j) o[j] = g[j] * sigmoid(g[j]) * u[j];
    packed::store<T, P>(out + static_cast<size_t>(q) * P, o);
  }
}

template <typename T, bool kFused>
__global__ void backward_packed(const T* dout, const T* gate, const T* up, T* dgate, T* dup, uint32_t packs,
                                uint32_t row_packs) {
  constexpr int P = packed::kPer16<T>;
  const uint32_t up_offset = kFused ? row_packs : 0;
  for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < packs; q += gridDim.x * blockDim.x) {
    const size_t at = static_cast<size_t>(input_pack<kFused>(q, row_packs)) * P;
    const size_t up_at = at + static_cast<size_t>(up_offset) * P;
    float d[P], g[P], u[P], dg[P], du[P];
    packed::load<T, P>(dout + static_cast<size_t>(q) * P, d);
    packed::load<T, P>(gate + at, g);
    packed::load<T, P>(up + up_at, u);
#pragma unroll
    for (int j = 0; j < P; ++j) {
      const float sg = sigmoid(g[j]);
      dg[j] = d[j] * u[j] * sg * (1.0f + g[j] * (1.0f - sg));
      du[j] = d[j] * g[j] * sg;
    }
    packed::store<T, P>(dgate + at, dg);
    packed::store<T, P>(dup + up_at, du);
  }
}

// Whether the vector path takes these tensors (cols = I); sets the pack counts.
bool packable(std::initializer_list<const Tensor*> tensors, int64_t cols, uint32_t& packs, uint32_t& row_packs) {
  const DType dtype = tensors.begin()[0]->dtype();
  const int64_t per_pack = dtype == DType::BF16 ? 8 : 4;
  for (const Tensor* t : tensors)
    if (t->dtype() != dtype || !packed::aligned16(t->raw_data())) return false;
  const int64_t total = tensors.begin()[0]->numel() / per_pack;
  // A pack index plus a row's packs must stay below 2^32 in input_pack; INT32_MAX leaves room for both.
  if (cols % per_pack != 0 || total > std::numeric_limits<int32_t>::max()) return false;
  packs = static_cast<uint32_t>(total);
  row_packs = static_cast<uint32_t>(cols / per_pack);
  return true;
}

template <bool kFused>
bool forward_vec(const Tensor& gate, const Tensor& up, Tensor& out, int64_t cols) {
  uint32_t packs = 0, row_packs = 0;
  if (!packable({&out, &gate, &up}, cols, packs, row_packs)) return false;
  if (packs == 0) return true;
  packed::with_float_type(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    forward_packed<T, kFused><<<grid_for(packs, kThreads), kThreads, 0, cuda_rt::stream()>>>(
        data_of<const T>(gate), data_of<const T>(up), data_of<T>(out), packs, row_packs);
    VEOMNI_CUDA_LAUNCH_CHECK();
  });
  return true;
}

template <bool kFused>
bool backward_vec(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup, int64_t cols) {
  uint32_t packs = 0, row_packs = 0;
  if (!packable({&dout, &gate, &up, &dgate, &dup}, cols, packs, row_packs)) return false;
  if (packs == 0) return true;
  packed::with_float_type(dout.dtype(), [&](auto tag) {
    using T = decltype(tag);
    backward_packed<T, kFused><<<grid_for(packs, kThreads), kThreads, 0, cuda_rt::stream()>>>(
        data_of<const T>(dout), data_of<const T>(gate), data_of<const T>(up), data_of<T>(dgate), data_of<T>(dup),
        packs, row_packs);
    VEOMNI_CUDA_LAUNCH_CHECK();
  });
  return true;
}

}  // namespace

// Each op takes the vector path when it can and the element-wise one otherwise (I not a multiple of 8 bf16 / 4 f32,
// slices off a 16-byte boundary, mixed dtypes).
void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out) {
  const int64_t cols = std::max<int64_t>(gate.dim(1), 1);
  if (forward_vec<false>(gate, up, out, cols)) return;
  forward(floats_of(gate), floats_of(up), {cols, cols, 0}, floats_of(out), gate.numel());
}

void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup) {
  const int64_t cols = std::max<int64_t>(gate.dim(1), 1);
  if (backward_vec<false>(dout, gate, up, dgate, dup, cols)) return;
  backward(floats_of(dout), floats_of(gate), floats_of(up), {cols, cols, 0}, floats_of(dgate), floats_of(dup),
           gate.numel());
}

void swiglu_fused_forward(const Tensor& gate_up, Tensor& out) {
  const int64_t cols = std::max<int64_t>(out.dim(1), 1);
  if (forward_vec<true>(gate_up, gate_up, out, cols)) return;
  const ConstFloats gu = floats_of(gate_up);
  forward(gu, gu, {cols, 2 * cols, cols}, floats_of(out), out.numel());
}

void swiglu_fused_backward(const Tensor& dout, const Tensor& gate_up, Tensor& dgate_up) {
  const int64_t cols = std::max<int64_t>(dout.dim(1), 1);
  if (backward_vec<true>(dout, gate_up, gate_up, dgate_up, dgate_up, cols)) return;
  const ConstFloats gu = floats_of(gate_up);
  const Floats dgu = floats_of(dgate_up);
  backward(floats_of(dout), gu, gu, {cols, 2 * cols, cols}, dgu, dgu, dout.numel());
}

}  // namespace veomni::ops::cuda
