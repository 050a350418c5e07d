// GPU range check of i64 index tensors: the first offending position is found with an atomic minimum, so the error
// names the same element the CPU backend would.
#include "kernels/cuda/index_checks.h"

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/kernel_utils.cuh"

namespace veomni::ops::cuda {
namespace {

__global__ void first_out_of_range(const int64_t* ids, int64_t n, int64_t limit, bool has_skip, int64_t skip,
                                   unsigned long long* first) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t v = ids[i];
    if ((v < 0 || v >= limit) && !(has_skip && v == skip)) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

std::atomic<bool> g_debug_checks{[] {
  const char* value = std::getenv("VEOMNI_DEBUG_CHECKS");
  return value != nullptr && std::strcmp(value, "1") == 0;
}()};

}  // namespace

void set_debug_checks(bool on) { g_debug_checks.store(on, std::memory_order_relaxed); }

bool debug_checks_enabled() { return g_debug_checks.load(std::memory_order_relaxed); }

void check_ids_in_range(const char* op, const char* name, const Tensor& ids, int64_t limit, const char* hint,
                        const int64_t* skip) {
  const int64_t n = ids.numel();
  if (n == 0 || !debug_checks_enabled()) return;
  Tensor first = Tensor::empty({1}, DType::I64, ids.device());
  const cudaStream_t stream = cuda_rt::stream();
  VEOMNI_CUDA_CHECK(cudaMemsetAsync(first.raw_data(), 0xff, sizeof(unsigned long long), stream));
  constexpr int kThreads = 256;
  first_out_of_range<<<grid_for(n, kThreads), kThreads, 0, stream>>>(
      data_of<int64_t>(ids), n, limit, skip != nullptr, skip ? *skip : 0, data_of<unsigned long long>(first));
  VEOMNI_CUDA_LAUNCH_CHECK();
  unsigned long long position = 0;
  cuda_rt::copy_to_host(&position, first.raw_data(), sizeof position);
  if (position == ULLONG_MAX) return;
  int64_t value = 0;
  cuda_rt::copy_to_host(&value, data_of<int64_t>(ids) + position, sizeof value);
  throw InputError(fmt::format("ops::{}: {}[{}] = {} is outside [0, {}){}; {}", op, name, position, value, limit,
                               skip ? fmt::format(" and is not the ignore index {}", *skip) : "", hint));
}

}  // namespace veomni::ops::cuda
