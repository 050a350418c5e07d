// Backend facade: forwards to kernels/cuda/runtime when the CUDA backend is built, answers "no GPU" otherwise.
#include "kernels/backend.h"

#include <cstring>
#include <utility>

#include "core/error.h"

#ifdef VEOMNI_WITH_CUDA
#include "kernels/cuda/runtime.h"
#endif

namespace veomni::backend {

#ifdef VEOMNI_WITH_CUDA

bool cuda_built() { return true; }
int cuda_device_count() { return cuda_rt::device_count(); }
void use_cuda_device(int index) { cuda_rt::initialize(index); }
void synchronize() {
  if (cuda_rt::initialized()) cuda_rt::synchronize();
}

GpuMemory gpu_memory() {
  if (!cuda_rt::initialized()) return {};
  const cuda_rt::MemoryStats s = cuda_rt::memory_stats();
  return {s.allocated, s.peak_allocated, s.reserved, s.peak_reserved, s.device_mallocs};
}

void reset_gpu_peak_memory() {
  if (cuda_rt::initialized()) cuda_rt::reset_peak_memory();
}

std::string gpu_name() {
  if (!cuda_rt::initialized()) return "";
  int device = 0;
  VEOMNI_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp properties{};
  VEOMNI_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  return properties.name;
}

PinnedHostRange::PinnedHostRange(void* data, size_t bytes) {
  if (!cuda_rt::initialized() || data == nullptr || bytes == 0) return;
  // A small buffer may share a page with one pinned already (the driver refuses overlaps): it then stays pageable,
  // which costs copy speed only.
  if (cudaHostRegister(data, bytes, cudaHostRegisterDefault) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return;
  }
  data_ = data;
}

PinnedHostRange::~PinnedHostRange() {
  // A failure here only leaves the pages locked until the process ends: nothing to throw for.
  if (data_) static_cast<void>(cudaHostUnregister(data_));
}

AsyncCopy::AsyncCopy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  // A host-to-host copy (CPU training in a CUDA build) runs at once and must not touch the CUDA runtime.
  const bool host_only = dst_device.is_cpu() && src_device.is_cpu();
  if (!cuda_rt::copy_or_enqueue(dst, dst_device, src, src_device, bytes, host_only ? nullptr : cuda_rt::stream())) return;
  const cudaEvent_t done = cuda_rt::acquire_event();
  cuda_rt::record_event(done, cuda_rt::stream());
  event_ = done;
}

void AsyncCopy::wait() {
  if (!event_) return;
  const auto done = static_cast<cudaEvent_t>(event_);
  event_ = nullptr;
  VEOMNI_CUDA_CHECK(cudaEventSynchronize(done));
  cuda_rt::release_event(done);
}

AsyncCopy::~AsyncCopy() {
  if (!event_) return;
  // The host buffer may be freed next: wait, but do not throw from a destructor (a failed copy failed the run
  // already or will at the next CUDA call).
  const auto done = static_cast<cudaEvent_t>(event_);
  static_cast<void>(cudaEventSynchronize(done));
  cuda_rt::release_event(done);
}

#else

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
void use_cuda_device(int index) {
  throw Error(fmt::format("GPU {} requested but this build has no CUDA backend (hint: configure with "
                          "-DVEOMNI_CUDA=ON on a machine with nvcc)", index));
}
void synchronize() {}
GpuMemory gpu_memory() { return {}; }
void reset_gpu_peak_memory() {}
std::string gpu_name() { return ""; }
PinnedHostRange::PinnedHostRange(void*, size_t) {}
PinnedHostRange::~PinnedHostRange() = default;

AsyncCopy::AsyncCopy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  VEOMNI_CHECK(dst_device.is_cpu() && src_device.is_cpu(), "a copy from {} to {} in a build without CUDA",
               src_device.str(), dst_device.str());
  if (bytes) std::memcpy(dst, src, bytes);
}
void AsyncCopy::wait() {}
AsyncCopy::~AsyncCopy() = default;

#endif

AsyncCopy& AsyncCopy::operator=(AsyncCopy&& other) noexcept {
  if (this != &other) {
    AsyncCopy old(std::move(*this));  // waits for what this held
    event_ = other.event_;
    other.event_ = nullptr;
  }
  return *this;
}

PinnedHostRange& PinnedHostRange::operator=(PinnedHostRange&& other) noexcept {
  if (this != &other) {
    PinnedHostRange old(std::move(*this));  // unpins what this held
    data_ = other.data_;
    other.data_ = nullptr;
  }
  return *this;
}

}  // namespace veomni::backend
