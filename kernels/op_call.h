// What the op front doors (kernels/*dispatch.cc) share: the checks of one call, each failure a veomni::Error that
// names the op, and the error of a CUDA tensor reaching a build without CUDA kernels.
#pragma once
#include <spdlog/fmt/fmt.h>

#include <utility>

#include "core/error.h"
#include "core/tensor.h"

namespace veomni::ops {

class OpCall {
 public:
  OpCall(const char* op, const Tensor& first) : op_(op), device_(first.device()) {}
  Device device() const { return device_; }

  template <typename... Args>
  void require(bool condition, fmt::format_string<Args...> format, Args&&... args) const {
    if (!condition) throw Error(fmt::format("ops::{}: {}", op_, fmt::format(format, std::forward<Args>(args)...)));
  }
  void rank(const Tensor& t, const char* name, int ndim) const {
    require(t.defined(), "{} is undefined", name);
    require(t.ndim() == ndim, "{} is {}, expected {} dimensions", name, t.describe(), ndim);
  }
  // t is on the call's device.
  void on_device(const Tensor& t, const char* name) const {
    require(t.device() == device_, "{} is on {} but the call's first tensor is on {}", name, t.device().str(),
            device_.str());
  }
  // t is on the call's device and f32 (bf16 too on CUDA).
  void float_dtype(const Tensor& t, const char* name) const {
    on_device(t, name);
    const bool ok = t.dtype() == DType::F32 || (device_.is_cuda() && t.dtype() == DType::BF16);
    require(ok, "{} is {}, expected {}", name, t.describe(), device_.is_cuda() ? "f32 or bf16" : "f32");
  }

 private:
  const char* op_;
  Device device_;
};

// Throws: `op` got tensors on `device` (CUDA) but this build has no CUDA kernels.
[[noreturn]] inline void no_cuda_kernels(const char* op, Device device) {
  throw Error(fmt::format("ops::{}: tensors are on {} but this build has no CUDA kernels", op, device.str()));
}

}  // namespace veomni::ops
