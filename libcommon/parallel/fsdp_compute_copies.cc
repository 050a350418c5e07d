// FSDP optimizer offload: the compute-dtype copies of the host masters on the compute device, and the chunk stream
// that refreshes them (after an optimizer step, which goes through the same stream, or a checkpoint restore).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "parallel/fsdp.h"

namespace veomni {

namespace {

// Element alignment of each shard in the compute buffer (256 bytes in bf16, as NCCL likes its buffers).
constexpr int64_t kOffloadAlign = 128;

int64_t aligned(int64_t n) { return (n + kOffloadAlign - 1) / kOffloadAlign * kOffloadAlign; }

}  // namespace

void Fsdp::build_offload() {
  std::vector<int64_t> offsets{0};
  for (const ParamShard& s : shards_) offsets.push_back(offsets.back() + aligned(s.shard_numel));
  compute_flat_ = Tensor::empty({offsets.back()}, compute_dtype_, compute_device_);
  for (size_t i = 0; i < shards_.size(); ++i)
    shards_[i].compute = compute_flat_.slice(offsets[i], offsets[i] + shards_[i].shard_numel);
  // A model smaller than one chunk needs no larger buffers than itself.
  const int64_t chunk = std::max<int64_t>(1, std::min(OffloadStream::kDefaultChunkElements, offsets.back()));
  stream_ = std::make_unique<OffloadStream>(compute_device_, compute_dtype_, chunk);
  masters_updated();
}

void Fsdp::set_offload_chunk_elements(int64_t elements) {
  VEOMNI_CHECK(offload_, "FSDP: offload chunks without offload");
  stream_ = std::make_unique<OffloadStream>(compute_device_, compute_dtype_, elements);
}

OffloadTarget Fsdp::offload_target(const ParamShard& shard) {
  if (!offload_ || shard.frozen()) return {};
  return {stream_.get(), shard.compute};
}

int64_t Fsdp::offload_host_bytes() const {
  int64_t bytes = offload_buffer_bytes();
  if (offload_)
    for (const ParamShard& s : shards_) bytes += static_cast<int64_t>(s.master.nbytes());
  return bytes;
}

int64_t Fsdp::offload_buffer_bytes() const { return offload_ ? stream_->host_bytes() : 0; }

void Fsdp::masters_updated() {
  if (!offload_ || shards_.empty()) return;
  std::vector<OffloadStream::Item> items;
  items.reserve(shards_.size());
  for (const ParamShard& s : shards_) items.push_back({s.master, s.compute, nullptr});
  // No host work: each chunk of masters is cast on the host (only compute-dtype bytes cross the bus) and copied.
  stream_->run(items, [](const std::vector<OffloadStream::Piece>&) {});
}

std::vector<Tensor> Fsdp::compute_copies(const std::vector<ParamShard*>& shards) {
  std::vector<Tensor> out;
  out.reserve(shards.size());
  for (const ParamShard* s : shards) out.push_back(s->compute);
  return out;
}

}  // namespace veomni
