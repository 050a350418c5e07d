// CUDA runtime plumbing shared by every CUDA kernel file: error checks naming file and line, the process's compute
// stream (and the communication stream beside it), the cuBLASLt handle, device discovery and the caching allocator
// that backs Tensor on Device::cuda().
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include "core/device.h"
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

// The communication stream: collectives that overlap compute (FSDP's prefetched all-gathers and its reduce-scatters,
// through Communicator::*_async) run on it, created at the greatest priority so that their few blocks start as soon
// as the compute kernels free an SM. The caching allocator below is NOT stream-aware: it hands a freed block to the
// next request at once, which is safe only for work ordered on the compute stream. Work on the communication stream
// therefore follows three rules:
//  (a) Before a collective, the communication stream waits for the compute stream (stream_wait_stream(comm_stream(),
//      stream()), after the collective's buffers were allocated): its inputs may have been produced there, and its
//      output blocks may have been freed by work still queued there.
//  (b) Before the compute stream reads a collective's output, it waits for an event recorded on the communication
//      stream after the collective.
//  (c) Every tensor a collective reads or writes stays referenced until the compute stream has waited as in (b); only
//      then is it released. A block freed after that wait is safe to reuse: later compute work is ordered after the
//      wait, and later communication work waits (a) for compute work queued after the free.
// Under these rules synchronize() and empty_cache(), which wait for the compute stream only, also cover every
// collective that the compute stream has waited for; one still unwaited (a prefetch in flight) keeps its buffers.
// Collectives of one NCCL communicator run in the order they were issued even across streams (NCCL orders them), so
// issuing on both streams is safe as long as every rank issues the same collectives in the same order.
cudaStream_t comm_stream();
// CUDA events (timing disabled) from a small pool. An event may go back to the pool right after a stream waited on
// it: the wait keeps the record it saw, and a later record does not change it.
cudaEvent_t acquire_event();
void release_event(cudaEvent_t event);
void record_event(cudaEvent_t event, cudaStream_t stream);
void stream_wait_event(cudaStream_t stream, cudaEvent_t event);
// Copies bytes between host and device memory: a host-to-host copy runs at once (returns false), any other is queued
// on `stream` with the direction the two devices give (returns true; the caller decides what waits for it).
bool copy_or_enqueue(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                     cudaStream_t stream, cudaMemcpyKind* kind_out = nullptr);
// Orders the work queued on `waiter` from now on after the work queued on `producer` so far (a pooled event).
void stream_wait_stream(cudaStream_t waiter, cudaStream_t producer);

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
// Queues a copy of host bytes to the device on the compute stream, ordered before the kernels queued after it. From
// pageable memory cudaMemcpyAsync returns once the bytes are staged, so `host_src` may go away when this returns
// (small per-launch tables: attention tiles, multi-tensor chunk tables, cuDNN sequence lengths and offsets).
void upload_from_host(void* device_dst, const void* host_src, size_t bytes);

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
