// Where a tensor lives (CPU or a CUDA device) and the allocator hook each backend registers.
#pragma once
#include <cstdint>
#include <cstddef>
#include <string>

namespace veomni {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& other) const = default;
  std::string str() const;
};

// A backend that owns device memory. The CPU one is built in; the CUDA backend registers its own so that
// core/ never depends on CUDA headers.
struct DeviceAllocator {
  virtual ~DeviceAllocator() = default;
  virtual void* allocate(size_t bytes, int device_index) = 0;
  virtual void deallocate(void* ptr, size_t bytes, int device_index) = 0;
  // Copies between host and device or within a device: kind is inferred from the two devices.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) = 0;
  virtual void fill_zero(void* ptr, size_t bytes, int device_index) = 0;
  // Strided copy within one device: `rows` rows of `width` bytes, rows `src_pitch` / `dst_pitch` bytes apart.
  // The default copies row by row; a backend overrides it with one call (cudaMemcpy2DAsync).
  virtual void copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows,
                       Device device) {
    for (size_t r = 0; r < rows; ++r)
      copy(static_cast<char*>(dst) + r * dst_pitch, device, static_cast<const char*>(src) + r * src_pitch, device, width);
  }
};

void register_device_allocator(DeviceType type, DeviceAllocator* allocator);
DeviceAllocator& device_allocator(DeviceType type);  // throws when the backend is not available

}  // namespace veomni
