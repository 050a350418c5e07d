// Optimizer offload's chunk pipeline: pinned double buffers between the host's f32 state and the compute device.
#include "optim/offload_stream.h"

#include <algorithm>
#include <utility>

#include "kernels/ops.h"

namespace veomni {

namespace {

// Every piece starts 256 bytes into an f32 buffer (aligned vector loads on the host, aligned copies on the bus).
constexpr int64_t kPieceAlign = 64;

int64_t piece_aligned(int64_t n) { return (n + kPieceAlign - 1) / kPieceAlign * kPieceAlign; }

backend::PinnedHostRange pin(const Tensor& host) { return {host.raw_data(), host.nbytes()}; }

}  // namespace

OffloadStream::OffloadStream(Device compute_device, DType compute_dtype, int64_t chunk_elements)
    : compute_device_(compute_device), compute_dtype_(compute_dtype), chunk_elements_(piece_aligned(chunk_elements)) {
  VEOMNI_CHECK(chunk_elements > 0, "offload chunks of {} elements", chunk_elements);
  for (Slot& slot : slots_) {
    slot.grads = Tensor::empty({chunk_elements_}, DType::F32, Device::cpu());
    slot.staged = Tensor::empty({chunk_elements_}, compute_dtype_, Device::cpu());
    // Only the ring is pinned (the copies touch nothing else on the host); nothing is pinned on a CPU run.
    pinned_.push_back(pin(slot.grads));
    pinned_.push_back(pin(slot.staged));
  }
}

OffloadStream::~OffloadStream() {
  // A run that threw may have left copies in flight: they end before the ring is unpinned and freed.
  for (Slot& slot : slots_) {
    slot.downloads.clear();
    slot.uploads.clear();
  }
}

int64_t OffloadStream::host_bytes() const {
  int64_t bytes = 0;
  for (const Slot& slot : slots_) bytes += static_cast<int64_t>(slot.grads.nbytes() + slot.staged.nbytes());
  return bytes;
}

// Items are packed in order into chunks of at most chunk_elements_ (aligned pieces); a large item spans several
// chunks, small ones share one. Empty items are skipped.
std::vector<OffloadStream::Chunk> OffloadStream::split(const std::vector<Item>& items) const {
  std::vector<Chunk> chunks;
  int64_t used = chunk_elements_;  // no chunk open
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& item = items[i];
    const int64_t n = item.master.numel();
    VEOMNI_CHECK(item.master.dtype() == DType::F32 && item.master.is_cpu(), "offload item {}: master {}", i,
                 item.master.describe());
    VEOMNI_CHECK(item.compute.numel() == n && item.compute.dtype() == compute_dtype_ &&
                     item.compute.device() == compute_device_,
                 "offload item {}: compute copy {} for master {} ({} on {} expected)", i, item.compute.describe(),
                 item.master.describe(), dtype_name(compute_dtype_), compute_device_.str());
    VEOMNI_CHECK(!item.grad || (item.grad->numel() == n && item.grad->dtype() == DType::F32 &&
                                item.grad->device() == compute_device_),
                 "offload item {}: gradient {} for master {}", i, item.grad ? item.grad->describe() : "",
                 item.master.describe());
    for (int64_t begin = 0; begin < n;) {
      if (used >= chunk_elements_) {
        chunks.emplace_back();
        used = 0;
      }
      const int64_t length = std::min(n - begin, chunk_elements_ - used);
      Chunk& chunk = chunks.back();
      chunk.pieces.push_back({i, begin, length, nullptr});
      chunk.offsets.push_back(used);
      chunk.any_grad = chunk.any_grad || item.grad != nullptr;
      used = piece_aligned(used + length);
      begin += length;
    }
  }
  return chunks;
}

void OffloadStream::wait(std::vector<backend::AsyncCopy>& copies) {
  for (backend::AsyncCopy& copy : copies) copy.wait();
  copies.clear();
}

void OffloadStream::download(const std::vector<Item>& items, const Chunk& chunk, Slot& slot) {
  wait(slot.downloads);
  for (size_t k = 0; k < chunk.pieces.size(); ++k) {
    const Piece& piece = chunk.pieces[k];
    const Tensor* grad = items[piece.item].grad;
    if (!grad) continue;
    // Queued after the work queued so far on the compute stream: the backward and the reductions that wrote it.
    slot.downloads.emplace_back(slot.grads.data<float>() + chunk.offsets[k], Device::cpu(),
                                grad->data<float>() + piece.begin, grad->device(),
                                static_cast<size_t>(piece.length) * sizeof(float));
  }
}

void OffloadStream::upload(const std::vector<Item>& items, const Chunk& chunk, Slot& slot, Staging staging) {
  std::vector<Tensor> masters, staged;
  masters.reserve(chunk.pieces.size());
  staged.reserve(chunk.pieces.size());
  std::vector<const Tensor*> src;
  std::vector<Tensor*> dst;
  for (size_t k = 0; k < chunk.pieces.size(); ++k) {
    const Piece& piece = chunk.pieces[k];
    masters.push_back(items[piece.item].master.slice(piece.begin, piece.begin + piece.length));
    staged.push_back(slot.staged.slice(chunk.offsets[k], chunk.offsets[k] + piece.length));
    src.push_back(&masters.back());
    dst.push_back(&staged.back());
  }
  // The rounding of the device cast (to nearest even): the compute copies get the bits a cast on the GPU gives.
  if (staging == Staging::CastAfterWork) ops::cast_multi(src, dst);
  const size_t element = dtype_size(compute_dtype_);
  for (size_t k = 0; k < chunk.pieces.size(); ++k) {
    const Piece& piece = chunk.pieces[k];
    const Tensor& compute = items[piece.item].compute;
    // Queued on the compute stream: every kernel queued later reads the new values.
    slot.uploads.emplace_back(static_cast<char*>(compute.raw_data()) + static_cast<size_t>(piece.begin) * element,
                              compute_device_, staged[k].raw_data(), Device::cpu(),
                              static_cast<size_t>(piece.length) * element);
  }
}

void OffloadStream::run(const std::vector<Item>& items, const HostWork& work, Staging staging) {
  std::vector<Chunk> chunks = split(items);
  if (chunks.empty()) return;
  if (chunks.front().any_grad) download(items, chunks.front(), slots_[0]);
  for (size_t c = 0; c < chunks.size(); ++c) {
    Slot& slot = slots_[c % 2];
    // The next chunk's gradients travel while the host works on this one (its buffer's last user, the chunk before
    // this one, is done).
    if (c + 1 < chunks.size() && chunks[c + 1].any_grad) download(items, chunks[c + 1], slots_[(c + 1) % 2]);
    wait(slot.downloads);
    wait(slot.uploads);  // the chunk before the last still reads the staging buffer
    Chunk& chunk = chunks[c];
    const size_t element = dtype_size(compute_dtype_);
    for (size_t k = 0; k < chunk.pieces.size(); ++k) {
      Piece& piece = chunk.pieces[k];
      if (items[piece.item].grad) piece.grad = slot.grads.data<float>() + chunk.offsets[k];
      piece.staged = static_cast<char*>(slot.staged.raw_data()) + static_cast<size_t>(chunk.offsets[k]) * element;
    }
    work(chunk.pieces);
    upload(items, chunk, slot, staging);
  }
  for (Slot& slot : slots_) wait(slot.uploads);
}

}  // namespace veomni
