// The built-in CPU allocator and the registry the CUDA backend plugs into.
#include "core/device.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"
#include "core/host_memory.h"

namespace veomni {

std::string Device::str() const { return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index); }

namespace {

std::atomic<int64_t> g_host_bytes{0};
std::atomic<int64_t> g_host_peak_bytes{0};

void raise_host_peak(int64_t bytes) {
  int64_t peak = g_host_peak_bytes.load(std::memory_order_relaxed);
  while (bytes > peak && !g_host_peak_bytes.compare_exchange_weak(peak, bytes, std::memory_order_relaxed)) {
  }
}

class CpuAllocator final : public DeviceAllocator {
 public:
  void* allocate(size_t bytes, int) override {
    // 64-byte alignment keeps SIMD loads aligned; aligned_alloc wants a size multiple of the alignment.
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (!p) throw Error(fmt::format("out of host memory allocating {} bytes", bytes));
    const int64_t now = g_host_bytes.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed) +
                        static_cast<int64_t>(bytes);
    raise_host_peak(now);
    return p;
  }
  void deallocate(void* ptr, size_t bytes, int) override {
    std::free(ptr);
    g_host_bytes.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  }
  void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) override {
    VEOMNI_CHECK(dst_device.is_cpu() && src_device.is_cpu(), "CPU allocator asked to copy {} -> {}", src_device.str(),
                 dst_device.str());
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void fill_zero(void* ptr, size_t bytes, int) override {
    if (bytes) std::memset(ptr, 0, bytes);
  }
};

CpuAllocator g_cpu_allocator;
DeviceAllocator* g_cuda_allocator = nullptr;

}  // namespace

HostMemoryStats host_memory_stats() {
  return {g_host_bytes.load(std::memory_order_relaxed), g_host_peak_bytes.load(std::memory_order_relaxed)};
}

void reset_host_memory_peak() { g_host_peak_bytes.store(g_host_bytes.load(std::memory_order_relaxed)); }

void register_device_allocator(DeviceType type, DeviceAllocator* allocator) {
  VEOMNI_CHECK(type == DeviceType::CUDA, "only the CUDA allocator can be registered");
  g_cuda_allocator = allocator;
}

DeviceAllocator& device_allocator(DeviceType type) {
  if (type == DeviceType::CPU) return g_cpu_allocator;
  if (!g_cuda_allocator)
    throw Error("CUDA device requested but this build has no CUDA backend initialised (build with VEOMNI_CUDA=ON)");
  return *g_cuda_allocator;
}

}  // namespace veomni
