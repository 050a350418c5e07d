// The chunk pipeline of optimizer offload: gradients come from the compute device a chunk at a time into a pinned
// ring, the host works on the chunk, and the updated f32 masters go back cast to the compute dtype, a chunk at a time.
//
// Host memory is the f32 masters and moments (owned elsewhere) plus this ring: two f32 gradient chunks and two
// compute-dtype chunks, of a bounded size whatever the model's (Fsdp shrinks it for a model smaller than one chunk).
// Copies are double-buffered: the gradient copy of chunk k+1 and the upload of chunk k-1 run while the host works on
// chunk k. On a CPU run (compute device = CPU) the same code runs with host-to-host copies and never touches the CUDA
// runtime.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "kernels/backend.h"

namespace veomni {

class OffloadStream {
 public:
  // One tensor streamed through the ring: its f32 master in host memory, the copy of it in the compute dtype on the
  // compute device that the master is cast into after the host's work, and optionally its f32 gradient on the
  // compute device, copied to the host before the work. All three have the master's element count.
  struct Item {
    Tensor master;
    Tensor compute;
    const Tensor* grad = nullptr;
  };
  // Elements [begin, begin + length) of item `item`; grad: their gradient in the pinned ring (null when the item has
  // none); staged: where in the ring their compute-dtype values go up from (length elements of compute_dtype()).
  struct Piece {
    size_t item = 0;
    int64_t begin = 0;
    int64_t length = 0;
    const float* grad = nullptr;
    void* staged = nullptr;
  };
  // The host's work on one chunk: its pieces, each one part of one item; it may change the pieces' masters.
  using HostWork = std::function<void(const std::vector<Piece>&)>;
  // Who casts the updated masters into the staging ring: the stream after the work, or the work itself (AdamW
  // writes them in its update's pass; the bits are the same).
  enum class Staging { CastAfterWork, WrittenByWork };

  // chunk_elements: the size of one chunk (rounded up to the alignment of pieces in it); tests use small ones so
  // that tensors cross chunk boundaries.
  OffloadStream(Device compute_device, DType compute_dtype, int64_t chunk_elements = kDefaultChunkElements);
  ~OffloadStream();
  OffloadStream(const OffloadStream&) = delete;
  OffloadStream& operator=(const OffloadStream&) = delete;

  // For every chunk of the items in order: its gradients to the host, work(pieces), its masters cast into the
  // compute copies. Returns once every copy is done (the compute copies are then current for every later kernel).
  void run(const std::vector<Item>& items, const HostWork& work, Staging staging = Staging::CastAfterWork);

  // Host bytes of the ring (the same for every model).
  int64_t host_bytes() const;
  int64_t chunk_elements() const { return chunk_elements_; }
  Device compute_device() const { return compute_device_; }
  DType compute_dtype() const { return compute_dtype_; }

  // 8 Mi elements: 32 MiB gradient chunks, 16 MiB bf16 ones; 96 MiB pinned in all under bf16 compute.
  static constexpr int64_t kDefaultChunkElements = int64_t{1} << 23;

 private:
  struct Chunk {
    std::vector<Piece> pieces;
    std::vector<int64_t> offsets;  // of each piece in the ring's buffers
    bool any_grad = false;
  };
  struct Slot {  // one of the two halves of the ring
    Tensor grads;   // f32 [chunk_elements]
    Tensor staged;  // compute dtype [chunk_elements]
    std::vector<backend::AsyncCopy> downloads;
    std::vector<backend::AsyncCopy> uploads;
  };

  std::vector<Chunk> split(const std::vector<Item>& items) const;
  void download(const std::vector<Item>& items, const Chunk& chunk, Slot& slot);
  void upload(const std::vector<Item>& items, const Chunk& chunk, Slot& slot, Staging staging);
  static void wait(std::vector<backend::AsyncCopy>& copies);

  Device compute_device_;
  DType compute_dtype_;
  int64_t chunk_elements_;
  Slot slots_[2];
  std::vector<backend::PinnedHostRange> pinned_;
};

}  // namespace veomni
