// CUDA runtime plumbing: error reporting, the process's device, compute stream and cuBLASLt handle, and the caching
// allocator that backs Tensor storage on Device::cuda() (size-binned free lists, so a steady step calls no cudaMalloc).
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/held_blocks.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/device.h"

namespace veomni::cuda_rt {

bool copy_or_enqueue(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                     cudaStream_t stream, cudaMemcpyKind* kind_out) {
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return false;
  }
  const cudaMemcpyKind kind = dst_device.is_cpu()   ? cudaMemcpyDeviceToHost
                              : src_device.is_cpu() ? cudaMemcpyHostToDevice
                                                    : cudaMemcpyDeviceToDevice;
  VEOMNI_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream));
  if (kind_out) *kind_out = kind;
  return true;
}
namespace {

// cuBLAS asks for 32 MiB on Hopper for its best kernels.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

// Block sizes: at least 512 bytes (which keeps every block 512-byte aligned), then 8 bins per power of two, so a block
// wastes at most 1/8 of its bytes and a bin serves every request that rounds to it.
size_t bin_size(size_t bytes) {
  constexpr size_t kMinBlock = 512;
  if (bytes <= kMinBlock) return kMinBlock;
  const size_t step = std::max(kMinBlock, std::bit_floor(bytes) / 8);
  return (bytes + step - 1) / step * step;
}

std::string format_bytes(size_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30)); }

class CachingAllocator final : public DeviceAllocator {
 public:
  CachingAllocator(int device, cudaStream_t stream) : device_(device), stream_(stream) {}

  void* allocate(size_t bytes, int device_index) override {
    check_device(device_index);
    if (bytes == 0) return nullptr;
    const size_t size = bin_size(bytes);
    std::lock_guard lock(mutex_);
    void* ptr = take_cached(size);
    if (!ptr) ptr = malloc_device(size, bytes);
    live_[ptr] = bytes;
    stats_.allocated += bytes;
    stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
    return ptr;
  }

  // Blocks go back to their bin at once: every kernel runs on the one compute stream, so work queued later that
  // reuses the block runs after the work queued before that still reads it.
  void deallocate(void* ptr, size_t, int) override {
    if (!ptr) return;
    std::lock_guard lock(mutex_);
    const auto it = live_.find(ptr);
    if (it == live_.end()) return;  // not ours (cannot throw from a destructor path); never happens through Storage
    stats_.allocated -= it->second;
    if (hold_)
      hold_->emplace_back(bin_size(it->second), ptr);
    else
      free_[bin_size(it->second)].push_back(ptr);
    live_.erase(it);
  }

  void hold_freed_blocks(HeldBlocks* sink) {
    std::lock_guard lock(mutex_);
    hold_ = sink;
  }

  void release_held(HeldBlocks& blocks) {
    std::lock_guard lock(mutex_);
    for (const auto& [size, ptr] : blocks) free_[size].push_back(ptr);
    blocks.clear();
  }

  void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) override {
    if (bytes == 0) return;
    cudaMemcpyKind kind = cudaMemcpyHostToHost;
    if (!copy_or_enqueue(dst, dst_device, src, src_device, bytes, stream_, &kind)) return;
    // The host reads the destination (D2H) or may free or reuse the source (H2D) as soon as we return.
    if (kind != cudaMemcpyDeviceToDevice) VEOMNI_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  // One strided copy on the stream. The base class's row-by-row default made the Ulysses all-to-all layouts one
  // cudaMemcpyAsync per token (65,536 per call at seq 64k under SP2): a step of the 0.6B shape did not finish in 100 s.
  void copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows,
               Device device) override {
    if (width == 0 || rows == 0) return;
    VEOMNI_CHECK(device.is_cuda(), "copy_2d on {} through the CUDA allocator", device.str());
    check_device(device.index);
    VEOMNI_CUDA_CHECK(
        cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDeviceToDevice, stream_));
  }

  void fill_zero(void* ptr, size_t bytes, int device_index) override {
    check_device(device_index);
    if (bytes) VEOMNI_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, stream_));
  }

  MemoryStats stats() {
    std::lock_guard lock(mutex_);
    return stats_;
  }

  void reset_peak() {
    std::lock_guard lock(mutex_);
    stats_.peak_allocated = stats_.allocated;
    stats_.peak_reserved = stats_.reserved;
  }

  void release_cached() {
    std::lock_guard lock(mutex_);
    release_cached_locked();
  }

 private:
  void check_device(int device_index) const {
    VEOMNI_CHECK(device_index == device_, "tensor on cuda:{} but this process initialised cuda:{}", device_index,
                 device_);
  }

  void* take_cached(size_t size) {
    const auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* ptr = it->second.back();
    it->second.pop_back();
    return ptr;
  }

  void* malloc_device(size_t size, size_t requested) {
    void* ptr = nullptr;
    cudaError_t status = cudaMalloc(&ptr, size);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear the error before retrying with the cache emptied
      release_cached_locked();
      status = cudaMalloc(&ptr, size);
    }
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      size_t free_bytes = 0, total_bytes = 0;
      (void)cudaMemGetInfo(&free_bytes, &total_bytes);
      throw Error(fmt::format(
          "CUDA out of memory on cuda:{} allocating {} bytes: {} live in tensors, {} reserved, {} free of {} on the "
          "device; lower the micro-batch tokens or enable activation recomputation",
          device_, requested, format_bytes(stats_.allocated), format_bytes(stats_.reserved), format_bytes(free_bytes),
          format_bytes(total_bytes)));
    }
    VEOMNI_CUDA_CHECK(status);
    stats_.reserved += size;
    stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
    ++stats_.device_mallocs;
    return ptr;
  }

  void release_cached_locked() {
    // Work still queued may read a cached block: wait for the stream before handing blocks back.
    VEOMNI_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (auto& [size, blocks] : free_) {
      for (void* ptr : blocks) {
        VEOMNI_CUDA_CHECK(cudaFree(ptr));
        stats_.reserved -= size;
      }
      blocks.clear();
    }
  }

  const int device_;
  const cudaStream_t stream_;
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;  // bin size -> free blocks
  std::unordered_map<void*, size_t> live_;               // block -> requested bytes
  HeldBlocks* hold_ = nullptr;                           // where freed blocks go while a graph is recorded
  MemoryStats stats_;
};

// What initialize() creates. Never destroyed: tensors freed during static destruction still reach the allocator.
struct Runtime {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t cublaslt = nullptr;
  void* workspace = nullptr;
  CachingAllocator* allocator = nullptr;
  cudaStream_t side[kSideStreams] = {};
  void* side_workspace[kSideStreams] = {};
  cudaEvent_t fork = nullptr;
  cudaEvent_t join[kSideStreams] = {};
  cudaStream_t comm = nullptr;
  std::mutex event_mutex;
  std::vector<cudaEvent_t> free_events;  // the event pool
};

std::mutex g_init_mutex;
std::atomic<Runtime*> g_runtime{nullptr};

Runtime& runtime() {
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (!rt) throw Error("the CUDA runtime is not initialised: call veomni::cuda_rt::initialize(device) first");
  return *rt;
}

}  // namespace

void fail(const char* expression, cudaError_t code, const char* file, int line) {
  (void)cudaGetLastError();  // clears a non-sticky error so the process can report and go on
  throw Error(fmt::format("{}:{}: {} failed: {} ({})", file, line, expression, cudaGetErrorName(code),
                          cudaGetErrorString(code)));
}

void fail_cublas(const char* expression, cublasStatus_t code, const char* file, int line) {
  throw Error(fmt::format("{}:{}: {} failed: {} ({})", file, line, expression, cublasLtGetStatusName(code),
                          cublasLtGetStatusString(code)));
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

void initialize(int device_index) {
  std::lock_guard lock(g_init_mutex);
  if (Runtime* rt = g_runtime.load(std::memory_order_acquire)) {
    VEOMNI_CHECK(rt->device == device_index, "the CUDA runtime already runs on cuda:{}, asked for cuda:{}",
                 rt->device, device_index);
    return;
  }
  const int count = device_count();
  if (device_index < 0 || device_index >= count)
    throw Error(fmt::format("cuda:{} requested but {} CUDA device(s) are visible{}", device_index, count,
                            count == 0 ? " (no driver or no GPU on this machine)" : " (check CUDA_VISIBLE_DEVICES)"));
  auto* rt = new Runtime;
  rt->device = device_index;
  VEOMNI_CUDA_CHECK(cudaSetDevice(device_index));
  // Non-blocking: our stream never waits on the legacy default stream that libraries may use.
  VEOMNI_CUDA_CHECK(cudaStreamCreateWithFlags(&rt->stream, cudaStreamNonBlocking));
  VEOMNI_CUBLAS_CHECK(cublasLtCreate(&rt->cublaslt));
  VEOMNI_CUDA_CHECK(cudaMalloc(&rt->workspace, kCublasWorkspaceBytes));
  VEOMNI_CUDA_CHECK(cudaEventCreateWithFlags(&rt->fork, cudaEventDisableTiming));
  for (int i = 0; i < kSideStreams; ++i) {
    VEOMNI_CUDA_CHECK(cudaStreamCreateWithFlags(&rt->side[i], cudaStreamNonBlocking));
    VEOMNI_CUDA_CHECK(cudaMalloc(&rt->side_workspace[i], kCublasWorkspaceBytes));
    VEOMNI_CUDA_CHECK(cudaEventCreateWithFlags(&rt->join[i], cudaEventDisableTiming));
  }
  int least_priority = 0, greatest_priority = 0;
  VEOMNI_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
  VEOMNI_CUDA_CHECK(cudaStreamCreateWithPriority(&rt->comm, cudaStreamNonBlocking, greatest_priority));
  rt->allocator = new CachingAllocator(device_index, rt->stream);
  register_device_allocator(DeviceType::CUDA, rt->allocator);
  g_runtime.store(rt, std::memory_order_release);
}

bool initialized() { return g_runtime.load(std::memory_order_acquire) != nullptr; }

cudaStream_t stream() { return runtime().stream; }

cublasLtHandle_t cublaslt() { return runtime().cublaslt; }

void* cublas_workspace(size_t* bytes) {
  if (bytes) *bytes = kCublasWorkspaceBytes;
  return runtime().workspace;
}

void synchronize() { VEOMNI_CUDA_CHECK(cudaStreamSynchronize(runtime().stream)); }

cudaStream_t side_stream(int index) {
  VEOMNI_CHECK(index >= 0 && index < kSideStreams, "side stream {} of {}", index, kSideStreams);
  return runtime().side[index];
}

void* side_cublas_workspace(int index, size_t* bytes) {
  VEOMNI_CHECK(index >= 0 && index < kSideStreams, "side stream {} of {}", index, kSideStreams);
  if (bytes) *bytes = kCublasWorkspaceBytes;
  return runtime().side_workspace[index];
}

void fork_side_streams() {
  Runtime& rt = runtime();
  VEOMNI_CUDA_CHECK(cudaEventRecord(rt.fork, rt.stream));
  for (cudaStream_t side : rt.side) VEOMNI_CUDA_CHECK(cudaStreamWaitEvent(side, rt.fork, 0));
}

void join_side_streams() {
  Runtime& rt = runtime();
  for (int i = 0; i < kSideStreams; ++i) {
    VEOMNI_CUDA_CHECK(cudaEventRecord(rt.join[i], rt.side[i]));
    VEOMNI_CUDA_CHECK(cudaStreamWaitEvent(rt.stream, rt.join[i], 0));
  }
}

cudaStream_t comm_stream() { return runtime().comm; }

cudaEvent_t acquire_event() {
  Runtime& rt = runtime();
  {
    std::lock_guard lock(rt.event_mutex);
    if (!rt.free_events.empty()) {
      cudaEvent_t event = rt.free_events.back();
      rt.free_events.pop_back();
      return event;
    }
  }
  cudaEvent_t event = nullptr;
  VEOMNI_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

void release_event(cudaEvent_t event) {
  if (!event) return;
  Runtime& rt = runtime();
  std::lock_guard lock(rt.event_mutex);
  rt.free_events.push_back(event);
}

void record_event(cudaEvent_t event, cudaStream_t stream) { VEOMNI_CUDA_CHECK(cudaEventRecord(event, stream)); }

void stream_wait_event(cudaStream_t stream, cudaEvent_t event) {
  VEOMNI_CUDA_CHECK(cudaStreamWaitEvent(stream, event, 0));
}

void stream_wait_stream(cudaStream_t waiter, cudaStream_t producer) {
  cudaEvent_t event = acquire_event();
  record_event(event, producer);
  stream_wait_event(waiter, event);
  release_event(event);
}

MemoryStats memory_stats() { return runtime().allocator->stats(); }

void reset_peak_memory() { runtime().allocator->reset_peak(); }

void empty_cache() { runtime().allocator->release_cached(); }

void start_holding_freed_blocks(HeldBlocks* sink) { runtime().allocator->hold_freed_blocks(sink); }

void stop_holding_freed_blocks() { runtime().allocator->hold_freed_blocks(nullptr); }

void release_held_blocks(HeldBlocks& blocks) { runtime().allocator->release_held(blocks); }

void upload_from_host(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  VEOMNI_CUDA_CHECK(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream()));
}

void copy_to_host(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes == 0) return;
  const cudaStream_t s = stream();
  VEOMNI_CUDA_CHECK(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, s));
  VEOMNI_CUDA_CHECK(cudaStreamSynchronize(s));
}

}  // namespace veomni::cuda_rt
