// Host memory held by tensors: the CPU allocator's current and peak bytes, which tests bound (a rank's share of a
// model while it loads).
#pragma once
#include <cstdint>

namespace veomni {

// Bytes the CPU allocator holds now and the most it held since the last reset_host_memory_peak() (as requested,
// before alignment).
struct HostMemoryStats {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
};
HostMemoryStats host_memory_stats();
// Makes the peak the current bytes.
void reset_host_memory_peak();

}  // namespace veomni
