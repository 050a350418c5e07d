// FSDP compute copies: the trainable shards' masters in the compute dtype on the compute device (written by the
// optimizer's step, or refreshed after a checkpoint restore), and with optimizer offload the chunk stream that
// carries them from the host masters. Frozen shards (a LoRA base) have no master and no copy: they stay as they are.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/ops.h"
#include "parallel/fsdp.h"

namespace veomni {

namespace {

// Element alignment of each shard in the compute buffer (256 bytes in bf16, as NCCL likes its buffers).
constexpr int64_t kOffloadAlign = 128;

int64_t offload_aligned(int64_t n) { return (n + kOffloadAlign - 1) / kOffloadAlign * kOffloadAlign; }

}  // namespace

void Fsdp::build_compute_copies() {
  // Frozen shards (LoRA's base) have no master: their compute-dtype slices stay the gathers' source, untouched.
  std::vector<int64_t> offsets{0};
  for (const ParamShard& s : shards_)
    offsets.push_back(offsets.back() + (s.frozen() ? 0 : offload_aligned(s.shard_numel)));
  compute_flat_ = Tensor::empty({offsets.back()}, compute_dtype_, compute_device_);
  for (size_t i = 0; i < shards_.size(); ++i)
    if (!shards_[i].frozen()) shards_[i].compute = compute_flat_.slice(offsets[i], offsets[i] + shards_[i].shard_numel);
  if (offload_) {
    // A model smaller than one chunk needs no larger buffers than itself.
    const int64_t chunk = std::max<int64_t>(1, std::min(OffloadStream::kDefaultChunkElements, offsets.back()));
    stream_ = std::make_unique<OffloadStream>(compute_device_, compute_dtype_, chunk);
  }
  masters_updated();
}

void Fsdp::set_offload_chunk_elements(int64_t elements) {
  VEOMNI_CHECK(offload_, "FSDP: offload chunks without offload");
  stream_ = std::make_unique<OffloadStream>(compute_device_, compute_dtype_, elements);
}

OffloadTarget Fsdp::optimizer_target(const ParamShard& shard) {
  if (!has_compute_copies() || shard.frozen()) return {};
  return {stream_.get(), shard.compute};
}

int64_t Fsdp::compute_copy_bytes() const {
  return compute_flat_.defined() ? static_cast<int64_t>(compute_flat_.nbytes()) : 0;
}

int64_t Fsdp::offload_host_bytes() const {
  int64_t bytes = offload_buffer_bytes();
  if (offload_)
    for (const ParamShard& s : shards_)
      if (!s.frozen()) bytes += static_cast<int64_t>(s.master.nbytes());
  return bytes;
}

int64_t Fsdp::offload_buffer_bytes() const { return offload_ ? stream_->host_bytes() : 0; }

void Fsdp::masters_updated() {
  if (!has_compute_copies() || shards_.empty()) return;
  if (!offload_) {
    std::vector<const Tensor*> src;
    std::vector<Tensor*> dst;
    for (ParamShard& s : shards_) {
      if (s.frozen()) continue;
      src.push_back(&s.master);
      dst.push_back(&s.compute);
    }
    ops::cast_multi(src, dst);
    return;
  }
  std::vector<OffloadStream::Item> items;
  items.reserve(shards_.size());
  for (const ParamShard& s : shards_)
    if (!s.frozen()) items.push_back({s.master, s.compute, nullptr});
  // No host work: each chunk of masters is cast on the host (only compute-dtype bytes cross the bus) and copied.
  stream_->run(items, [](const std::vector<OffloadStream::Piece>&) {});
}

std::vector<Tensor> Fsdp::compute_copies(const std::vector<ParamShard*>& shards) {
  std::vector<Tensor> out;
  out.reserve(shards.size());
  for (const ParamShard* s : shards) out.push_back(s->frozen() ? s->frozen_values : s->compute);
  return out;
}

}  // namespace veomni
