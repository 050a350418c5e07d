// CUDA attention benchmark: forward/backward TFLOP/s of packed varlen attention at 4k and 16k tokens, causal,
// Hq 16 / Hkv 8, head_dim 128, bf16 (tensor cores) and f32 (FMA) for comparison, through each attention backend
// (our kernels, cuDNN's fused attention) side by side. Prints a markdown table; asserts nothing. FLOPs: the
// flash-attention count 4·S²·D·Hq/2 forward (causal) per sequence, 2.5 times that backward.
// Usage: bench_attention_cuda [--f32] [--backend native|cudnn|auto|both]   (f32 rows are slow and always native;
// default: both native and cudnn rows for bf16)
#ifdef VEOMNI_WITH_CUDA
#include <cuda_runtime.h>
#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "bench/cuda_timer.h"
#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/runtime.h"
#include "kernels/ops.h"

using namespace veomni;

namespace {

Tensor random_device_tensor(const Shape& shape, DType dtype, uint64_t seed) {
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.data<float>();
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = static_cast<float>(state >> 40) * (2.0f / 16777216.0f) - 1.0f;
  }
  return t.to_dtype(dtype).to(Device::cuda(0));
}

using veomni::benchmarking::time_ms;

struct Case {
  int64_t seq;
  int batch;  // sequences of `seq` tokens packed together
  DType dtype;
};

void bench(const Case& c, ops::cuda::AttentionBackend backend) {
  ops::cuda::set_attention_backend(backend);
  constexpr int64_t hq = 16, hkv = 8, d = 128;
  const int64_t s = c.seq * c.batch;
  std::vector<int32_t> cu;
  for (int b = 0; b <= c.batch; ++b) cu.push_back(static_cast<int32_t>(b * c.seq));
  const Device gpu = Device::cuda(0);
  const Tensor q = random_device_tensor({s, hq, d}, c.dtype, 1), k = random_device_tensor({s, hkv, d}, c.dtype, 2);
  const Tensor v = random_device_tensor({s, hkv, d}, c.dtype, 3), dout = random_device_tensor({s, hq, d}, c.dtype, 4);
  Tensor out = Tensor::empty(q.shape(), c.dtype, gpu), lse = Tensor::empty({hq, s}, DType::F32, gpu);
  Tensor dq = Tensor::empty(q.shape(), c.dtype, gpu), dk = Tensor::empty(k.shape(), c.dtype, gpu);
  Tensor dv = Tensor::empty(v.shape(), c.dtype, gpu);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const double fwd_flops = 4.0 * static_cast<double>(c.seq) * c.seq * d * hq / 2.0 * c.batch;
  const double fwd = time_ms(5, [&] { ops::attention_forward(q, k, v, cu, true, scale, out, lse); });
  const double bwd = time_ms(5, [&] { ops::attention_backward(dout, q, k, v, out, lse, cu, true, scale, dq, dk, dv); });
  const std::string shape = fmt::format("{}x{} Hq={} Hkv={} D={}", c.batch, c.seq, hq, hkv, d);
  fmt::print("| {:<5} | {:<6} | {:<30} | {:>9.3f} | {:>8.1f} | {:>9.3f} | {:>8.1f} |\n", dtype_name(c.dtype),
             ops::cuda::attention_backend_name(backend), shape, fwd, fwd_flops / fwd / 1e9, bwd,
             2.5 * fwd_flops / bwd / 1e9);
}

// Backends of the bf16 rows: --backend both (default) runs native then cudnn.
std::vector<ops::cuda::AttentionBackend> parse_backends(const std::string& text) {
  if (text == "both") return {ops::cuda::AttentionBackend::Native, ops::cuda::AttentionBackend::Cudnn};
  return {ops::cuda::parse_attention_backend(text, "--backend")};
}

}  // namespace

int main(int argc, char** argv) {
  bool with_f32 = false;
  std::string backend_text = "both";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--f32") == 0) {
      with_f32 = true;
    } else if (std::strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
      backend_text = argv[++i];
    } else {
      fmt::print(stderr, "usage: bench_attention_cuda [--f32] [--backend native|cudnn|auto|both]\n");
      return 2;
    }
  }
  std::vector<ops::cuda::AttentionBackend> backends;
  try {
    backends = parse_backends(backend_text);
  } catch (const Error& e) {
    fmt::print(stderr, "bench_attention_cuda: {}\n", e.what());
    return 2;
  }
  if (cuda_rt::device_count() == 0) {
    fmt::print(stderr, "bench_attention_cuda: no CUDA device\n");
    return 1;
  }
  cuda_rt::initialize(0);
  cudaDeviceProp prop{};
  VEOMNI_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  fmt::print("CUDA attention on {}, causal\n\n", prop.name);
  fmt::print("| {:<5} | {:<6} | {:<30} | {:>9} | {:>8} | {:>9} | {:>8} |\n", "dtype", "attn", "shape", "fwd ms",
             "TFLOP/s", "bwd ms", "TFLOP/s");
  fmt::print("|{:-<7}|{:-<8}|{:-<32}|{:->11}|{:->10}|{:->11}|{:->10}|\n", "", "", "", "", "", "", "");
  for (const Case& c : {Case{4096, 1, DType::BF16}, Case{4096, 4, DType::BF16}, Case{16384, 1, DType::BF16}})
    for (ops::cuda::AttentionBackend backend : backends) bench(c, backend);
  if (with_f32) bench({4096, 1, DType::F32}, ops::cuda::AttentionBackend::Native);
  return 0;
}
#else
#include <cstdio>

int main() {
  std::fprintf(stderr, "bench_attention_cuda: this build has no CUDA backend (configure with -DVEOMNI_CUDA=ON)\n");
  return 1;
}
#endif
