// The compute backends as the trainer sees them: whether CUDA is built and usable, device selection and GPU memory
// figures, without any CUDA header (the CPU-only build answers "no GPU").
#pragma once
#include <cstddef>
#include <string>

#include "core/device.h"

namespace veomni::backend {

// Whether this build contains the CUDA backend.
bool cuda_built();
// Usable GPUs (0 without the CUDA backend, a driver or a device; never throws).
int cuda_device_count();
// Binds this process to GPU `index` (its compute stream, cuBLASLt handle and caching allocator). Throws when the
// index is out of range or the build has no CUDA.
void use_cuda_device(int index);
// Waits for all queued GPU work of this process (no-op without CUDA).
void synchronize();

// Caching-allocator figures of the bound GPU (all zero without CUDA).
struct GpuMemory {
  size_t allocated = 0;
  size_t peak_allocated = 0;  // since the last reset_gpu_peak_memory
  size_t reserved = 0;
  size_t peak_reserved = 0;
  size_t device_mallocs = 0;  // cudaMalloc calls so far
};
GpuMemory gpu_memory();
void reset_gpu_peak_memory();
// The bound GPU's name as the driver reports it ("NVIDIA H100 80GB HBM3"); "" without one.
std::string gpu_name();

// Page-locks a range of host memory (cudaHostRegister) so that copies between it and the GPU run by DMA at the
// bus's speed; unpins it when destroyed. Pins nothing without a CUDA device in use (the CPU build, a CPU run).
class PinnedHostRange {
 public:
  PinnedHostRange() = default;
  PinnedHostRange(void* data, size_t bytes);
  ~PinnedHostRange();
  PinnedHostRange(PinnedHostRange&& other) noexcept : data_(other.data_) { other.data_ = nullptr; }
  PinnedHostRange& operator=(PinnedHostRange&& other) noexcept;
  PinnedHostRange(const PinnedHostRange&) = delete;
  PinnedHostRange& operator=(const PinnedHostRange&) = delete;
  bool pinned() const { return data_ != nullptr; }

 private:
  void* data_ = nullptr;  // set while pinned
};

// A copy between host memory and the GPU queued on the compute stream (after the work queued there so far) that
// returns at once; wait() blocks until it is done, as does destruction. The host side must stay alive and untouched
// until then, and should be pinned (from pageable memory the copy runs synchronously). A copy between two host
// buffers (the CPU build, a CPU run) is done when the constructor returns.
class AsyncCopy {
 public:
  AsyncCopy() = default;
  AsyncCopy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
  ~AsyncCopy();
  AsyncCopy(AsyncCopy&& other) noexcept : event_(other.event_) { other.event_ = nullptr; }
  AsyncCopy& operator=(AsyncCopy&& other) noexcept;
  AsyncCopy(const AsyncCopy&) = delete;
  AsyncCopy& operator=(const AsyncCopy&) = delete;
  void wait();

 private:
  void* event_ = nullptr;  // the CUDA event recorded after the copy, while it may still run
};

}  // namespace veomni::backend
