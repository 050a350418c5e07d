// Helpers of the GPU tests: a fixture that skips without a GPU, host <-> device tensor moves, and comparisons of a
// CUDA op against its CPU twin.
//
// Tolerances (|got - want| <= rtol * (|want| + max|want|), i.e. relative to the element and to the tensor's scale,
// so that sums that cancel to near zero are judged by the size of their terms):
// - f32 on both sides: rtol 1e-5 (the GPU sums in other orders, fp32 or wider).
// - bf16 on the GPU: the CPU reference runs in f32 on the same bf16-rounded inputs, so only the GPU's bf16 outputs
//   (2^-9 relative rounding) and its intermediates differ: rtol 1e-2.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/cuda/index_checks.h"
#include "kernels/cuda/runtime.h"

namespace veomni::gpu_test {

inline constexpr double kF32Rtol = 1e-5;
inline constexpr double kBf16Rtol = 1e-2;

inline double rtol_for(DType dtype) { return dtype == DType::BF16 ? kBf16Rtol : kF32Rtol; }

// Every GPU test derives from this: skipped (reported as such by ctest) when the machine has no CUDA device.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_rt::device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
    cuda_rt::initialize(0);
  }
};

inline Device gpu() { return Device::cuda(0); }

// Turns the device-side id range checks (off by default, train.kernels.debug_checks) on for a test's scope.
class DebugChecksOn {
 public:
  DebugChecksOn() : was_(ops::cuda::debug_checks_enabled()) { ops::cuda::set_debug_checks(true); }
  ~DebugChecksOn() { ops::cuda::set_debug_checks(was_); }
  DebugChecksOn(const DebugChecksOn&) = delete;
  DebugChecksOn& operator=(const DebugChecksOn&) = delete;

 private:
  bool was_;
};

inline Tensor random_f32(const Shape& shape, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

// The f32 values `dtype` can hold: what the CPU reference must see when the GPU runs on bf16 inputs.
inline Tensor representable(const Tensor& cpu_f32, DType dtype) {
  return dtype == DType::F32 ? cpu_f32.clone() : cpu_f32.to_dtype(dtype).to_dtype(DType::F32);
}

// A CPU f32 tensor converted to `dtype` and moved to the GPU.
inline Tensor to_gpu(const Tensor& cpu_f32, DType dtype = DType::F32) { return cpu_f32.to_dtype(dtype).to(gpu()); }

// A GPU tensor back on the host as f32 (index tensors keep their dtype).
inline Tensor to_host(const Tensor& device) {
  const Tensor host = device.to(Device::cpu());
  return dtype_is_floating(host.dtype()) ? host.to_dtype(DType::F32) : host;
}

inline ::testing::AssertionResult close_to(const Tensor& got_any, const Tensor& want_any, double rtol) {
  const Tensor got = got_any.is_cpu() ? got_any.to_dtype(DType::F32) : to_host(got_any);
  const Tensor want = want_any.is_cpu() ? want_any.to_dtype(DType::F32) : to_host(want_any);
  if (got.numel() != want.numel())
    return ::testing::AssertionFailure() << got.describe() << " vs " << want.describe();
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  double scale = 0.0;
  for (int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::fabs(static_cast<double>(w[i])));
  double worst = 0.0;
  int64_t worst_i = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double err = std::fabs(static_cast<double>(g[i]) - w[i]);
    const double excess = std::isnan(err) ? INFINITY : err - rtol * (std::fabs(static_cast<double>(w[i])) + scale);
    if (excess > worst) {
      worst = excess;
      worst_i = i;
    }
  }
  if (worst_i < 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << worst_i << " of " << want.numel() << ": got " << g[worst_i]
                                       << ", want " << w[worst_i] << " (rtol " << rtol << ", tensor scale " << scale
                                       << ")";
}

inline ::testing::AssertionResult bitwise_equal(const Tensor& a_any, const Tensor& b_any) {
  const Tensor a = a_any.to(Device::cpu());
  const Tensor b = b_any.to(Device::cpu());
  if (a.dtype() != b.dtype() || a.nbytes() != b.nbytes() || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) != 0)
    return ::testing::AssertionFailure() << a.describe() << " and " << b.describe() << " differ bitwise";
  return ::testing::AssertionSuccess();
}

// The activation dtypes every op is tested in.
inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> dtypes{DType::F32, DType::BF16};
  return dtypes;
}

}  // namespace veomni::gpu_test
