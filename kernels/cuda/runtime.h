// CUDA runtime plumbing shared by every CUDA kernel file: error checks naming file and line, the process's compute
// stream, the cuBLASLt handle, device discovery and the caching allocator that backs Tensor on Device::cuda().
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include "core/error.h"

namespace veomni::cuda_rt {

[[noreturn]] void fail(const char* expression, cudaError_t code, const char* file, int line);
[[noreturn]] void fail_cublas(const char* expression, cublasStatus_t code, const char* file, int line);

// Number of usable GPUs (0 when there is no driver or no device; never throws).
int device_count();
// Selects the device, creates the stream and handles, and registers the CUDA allocator with core/ (idempotent).
void initialize(int device_index);
bool initialized();

cudaStream_t stream();           // the compute stream of this process (all ops run on it)
cublasLtHandle_t cublaslt();     // shared handle
void* cublas_workspace(size_t* bytes);  // a workspace for cuBLASLt matmuls
void synchronize();              // waits for the compute stream

// Side streams for independent pieces of one op (the groups of a grouped GEMM), each with a cuBLASLt workspace of
// its own. fork_side_streams() orders them after the work queued on stream() so far; join_side_streams() orders the
// work queued on stream() afterwards after everything queued on them. Ops join before they return, so callers only
// ever see stream(), and memory freed on stream() is never reused while a side stream still reads it.
inline constexpr int kSideStreams = 4;
cudaStream_t side_stream(int index);
void* side_cublas_workspace(int index, size_t* bytes);
void fork_side_streams();
void join_side_streams();

// Caching allocator statistics (bytes).
struct MemoryStats {
  size_t allocated = 0;       // live tensor bytes
  size_t peak_allocated = 0;  // high-water mark since the last reset
  size_t reserved = 0;        // held from cudaMalloc, live or cached
  size_t peak_reserved = 0;   // high-water mark of reserved since the last reset
  size_t device_mallocs = 0;  // cudaMalloc calls so far (a steady training step adds none)
};
MemoryStats memory_stats();
void reset_peak_memory();
// Returns the cached (free) blocks to the driver, after waiting for the stream; live tensors are untouched.
void empty_cache();

// Copies device memory to the host and waits for it (small reads: flags, counts, reduction results).
void copy_to_host(void* host_dst, const void* device_src, size_t bytes);

}  // namespace veomni::cuda_rt

#define VEOMNI_CUDA_CHECK(expression)                                                       \
  do {                                                                                      \
    const cudaError_t veomni_cuda_status_ = (expression);                                   \
    if (veomni_cuda_status_ != cudaSuccess) [[unlikely]]                                    \
      ::veomni::cuda_rt::fail(#expression, veomni_cuda_status_, __FILE__, __LINE__);        \
  } while (0)

#define VEOMNI_CUBLAS_CHECK(expression)                                                     \
  do {                                                                                      \
    const cublasStatus_t veomni_cublas_status_ = (expression);                              \
    if (veomni_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                        \
      ::veomni::cuda_rt::fail_cublas(#expression, veomni_cublas_status_, __FILE__, __LINE__); \
  } while (0)
