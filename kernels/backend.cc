// Backend facade: forwards to kernels/cuda/runtime when the CUDA backend is built, answers "no GPU" otherwise.
#include "kernels/backend.h"

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

#endif

}  // namespace veomni::backend
