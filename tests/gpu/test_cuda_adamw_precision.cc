// GPU tests of adamw_step_multi's fused compute copy and bf16 moments: the CUDA step writing the bf16/f16 copy equals
// the CUDA step followed by cast_multi, and with bf16 moments equals the CPU kernel, bit for bit.
#include <cstring>
#include <vector>

#include "gpu_test_util.h"
#include "kernels/ops.h"

using namespace veomni;
using namespace veomni::gpu_test;

namespace {

class CudaAdamwPrecision : public CudaTest {};

// Chunk boundaries of the multi-tensor walk (16384 elements), an empty slot and a slice that is not 16-byte aligned.
std::vector<Tensor> slot_inputs(std::mt19937& rng, float lo, float hi) {
  std::vector<Tensor> xs;
  for (int64_t n : {int64_t{1}, int64_t{0}, int64_t{16384}, int64_t{16385}, int64_t{200003}})
    xs.push_back(random_f32({n}, rng, lo, hi));
  xs.push_back(random_f32({1001}, rng, lo, hi).slice(1, 1001));
  return xs;
}

// One optimizer's state on one device: f32 params, moments of one dtype, compute copies of another (or none).
struct State {
  std::vector<Tensor> p, m, v, c;

  State(const std::vector<Tensor>& start, DType moments, DType copy, Device device) {
    for (const Tensor& t : start) {
      p.push_back(t.clone().to(device));
      m.push_back(Tensor::zeros(t.shape(), moments, device));
      v.push_back(Tensor::zeros(t.shape(), moments, device));
      if (copy != DType::F32) c.push_back(Tensor::zeros(t.shape(), copy, device));
    }
  }
  void step(std::vector<Tensor>& grads, int64_t t, float grad_scale, bool with_copy) {
    std::vector<ops::AdamWTensors> slots;
    for (size_t i = 0; i < p.size(); ++i)
      slots.push_back({&p[i], &grads[i], &m[i], &v[i], i % 2 == 0 ? 0.01 : 0.0, with_copy ? &c[i] : nullptr});
    ops::adamw_step_multi(slots, 1e-3, 0.9, 0.999, 1e-8, t, grad_scale);
  }
  void cast_params_into_copies() {
    std::vector<const Tensor*> src;
    std::vector<Tensor*> dst;
    for (size_t i = 0; i < p.size(); ++i) {
      src.push_back(&p[i]);
      dst.push_back(&c[i]);
    }
    ops::cast_multi(src, dst);
  }
};

}  // namespace

TEST_F(CudaAdamwPrecision, FusedComputeCopyEqualsStepThenCastBitForBit) {
  std::mt19937 rng(101);
  for (const DType moments : {DType::F32, DType::BF16})
    for (const DType copy : {DType::BF16, DType::F16})
      for (const float grad_scale : {1.0f, 0.3f}) {
        SCOPED_TRACE(fmt::format("moments {} copy {} scale {}", dtype_name(moments), dtype_name(copy), grad_scale));
        const std::vector<Tensor> start = slot_inputs(rng, -1.0f, 1.0f);
        State fused(start, moments, copy, gpu()), separate(start, moments, copy, gpu());
        for (int64_t t = 1; t <= 3; ++t) {
          std::vector<Tensor> g;
          for (const Tensor& x : slot_inputs(rng, -0.1f, 0.1f)) g.push_back(x.to(gpu()));
          fused.step(g, t, grad_scale, true);
          separate.step(g, t, grad_scale, false);
          separate.cast_params_into_copies();
        }
        for (size_t i = 0; i < start.size(); ++i) {
          SCOPED_TRACE(fmt::format("slot {} ({} elements)", i, start[i].numel()));
          EXPECT_TRUE(bitwise_equal(fused.c[i], separate.c[i]));
          EXPECT_TRUE(bitwise_equal(fused.p[i], separate.p[i]));
          EXPECT_TRUE(bitwise_equal(fused.m[i], separate.m[i]));
          EXPECT_TRUE(bitwise_equal(fused.v[i], separate.v[i]));
        }
      }
}

TEST_F(CudaAdamwPrecision, MatchesTheCpuKernelBitForBit) {
  // The CPU twin is the reference: bf16 moments and both copy dtypes give the same bits on the GPU.
  std::mt19937 rng(102);
  for (const DType moments : {DType::F32, DType::BF16})
    for (const DType copy : {DType::BF16, DType::F16}) {
      SCOPED_TRACE(fmt::format("moments {} copy {}", dtype_name(moments), dtype_name(copy)));
      const std::vector<Tensor> start = slot_inputs(rng, -1.0f, 1.0f);
      State on_gpu(start, moments, copy, gpu()), on_cpu(start, moments, copy, Device::cpu());
      for (int64_t t = 1; t <= 3; ++t) {
        std::vector<Tensor> g = slot_inputs(rng, -0.1f, 0.1f), gg;
        for (const Tensor& x : g) gg.push_back(x.to(gpu()));
        on_gpu.step(gg, t, 0.3f, true);
        on_cpu.step(g, t, 0.3f, true);
      }
      for (size_t i = 0; i < start.size(); ++i) {
        SCOPED_TRACE(fmt::format("slot {} ({} elements)", i, start[i].numel()));
        EXPECT_TRUE(bitwise_equal(on_gpu.p[i], on_cpu.p[i]));
        EXPECT_TRUE(bitwise_equal(on_gpu.m[i], on_cpu.m[i]));
        EXPECT_TRUE(bitwise_equal(on_gpu.v[i], on_cpu.v[i]));
        EXPECT_TRUE(bitwise_equal(on_gpu.c[i], on_cpu.c[i]));
      }
    }
}
