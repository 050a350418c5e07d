// FSDP optimizer offload: host gradients and compute-dtype copies of the masters, and the copies between them: reduced
// gradients travel to the host while the next group computes, the masters' copy to the GPU while the next step's data
// is read.
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/ops.h"
#include "parallel/fsdp.h"

namespace veomni {

namespace {

// Element alignment of each shard in the flat buffers (256 bytes in bf16, as NCCL likes its buffers).
constexpr int64_t kOffloadAlign = 128;

int64_t aligned(int64_t n) { return (n + kOffloadAlign - 1) / kOffloadAlign * kOffloadAlign; }

// Start of each shard in a flat buffer, and the buffer's length (last entry).
std::vector<int64_t> flat_offsets(const std::vector<ParamShard>& shards) {
  std::vector<int64_t> offsets{0};
  for (const ParamShard& s : shards) offsets.push_back(offsets.back() + aligned(s.shard_numel));
  return offsets;
}

backend::PinnedHostRange pin(const Tensor& host) { return {host.raw_data(), host.nbytes()}; }

}  // namespace

void Fsdp::build_offload() {
  const std::vector<int64_t> offsets = flat_offsets(shards_);
  const int64_t total = offsets.back();
  host_grads_ = Tensor::zeros({total}, DType::F32, Device::cpu());
  host_incoming_ = Tensor::empty({total}, reduce_dtype_, Device::cpu());
  compute_flat_ = Tensor::empty({total}, compute_dtype_, compute_device_);
  // The masters are cast on the host, so only compute-dtype bytes cross the bus, and the gradients come back into
  // host_grads_ or host_incoming_: those buffers are what the copies touch, so they are the ones pinned.
  staging_ = compute_device_.is_cpu() ? compute_flat_ : Tensor::empty({total}, compute_dtype_, Device::cpu());
  pinned_.push_back(pin(host_grads_));
  pinned_.push_back(pin(host_incoming_));
  if (!compute_device_.is_cpu()) pinned_.push_back(pin(staging_));
  for (size_t i = 0; i < shards_.size(); ++i) {
    ParamShard& s = shards_[i];
    s.grad = host_grads_.slice(offsets[i], offsets[i] + s.shard_numel);
    s.compute = compute_flat_.slice(offsets[i], offsets[i] + s.shard_numel);
  }
  masters_updated();
}

void Fsdp::masters_updated() {
  if (!offload_ || shards_.empty()) return;
  const std::vector<int64_t> offsets = flat_offsets(shards_);
  std::vector<Tensor> staged;
  std::vector<const Tensor*> src;
  std::vector<Tensor*> dst;
  staged.reserve(shards_.size());
  for (size_t i = 0; i < shards_.size(); ++i) {
    staged.push_back(staging_.slice(offsets[i], offsets[i] + shards_[i].shard_numel));
    src.push_back(&shards_[i].master);
    dst.push_back(&staged.back());
  }
  compute_upload_.wait();  // the last upload still reads staging_ (long done: a whole step ran since)
  // The same rounding as the device cast without offload (round to nearest even), so the gathers send the same bits.
  ops::cast_multi(src, dst);
  // Queued on the compute stream, so every later kernel and (after their wait for the compute stream) every gather
  // reads the new values; the host goes on to the next step's data meanwhile.
  if (!compute_device_.is_cpu())
    compute_upload_ = backend::AsyncCopy(compute_flat_.raw_data(), compute_device_, staging_.raw_data(), Device::cpu(),
                                         staging_.nbytes());
}

std::vector<Tensor> Fsdp::compute_copies(const std::vector<ParamShard*>& shards) {
  std::vector<Tensor> out;
  out.reserve(shards.size());
  for (const ParamShard* s : shards) out.push_back(s->compute);
  return out;
}

void Fsdp::send_to_host(ParamShard& s, const Tensor& reduced) {
  // A sum of this shard still under way lands first: sums are added in the order they were reduced.
  for (const HostLanding& pending : landings_)
    if (pending.shard == &s) {
      land(0);
      break;
    }
  HostLanding landing;
  landing.shard = &s;
  // The step's first f32 sum becomes the gradient (0 + x = x), as on the device: it lands in place.
  landing.into_grad = !s.grad_written && reduced.dtype() == DType::F32;
  const int64_t offset = s.grad.data<float>() - host_grads_.data<float>();  // the same place in both buffers
  landing.host = landing.into_grad ? s.grad : host_incoming_.slice(offset, offset + s.shard_numel);
  landing.copy = backend::AsyncCopy(landing.host.raw_data(), Device::cpu(), reduced.raw_data(), reduced.device(),
                                    reduced.nbytes());
  landings_.push_back(std::move(landing));
}

void Fsdp::land(size_t keep) {
  while (landings_.size() > keep) land_one();
}

void Fsdp::land_one() {
  HostLanding& landing = landings_.front();
  landing.copy.wait();
  ParamShard& s = *landing.shard;
  if (!landing.into_grad) {
    // The arithmetic of the device path: widened exactly from reduce_dtype, then added in f32 (or the first sum).
    Tensor widened = landing.host;
    if (widened.dtype() != DType::F32) {
      widened = s.grad_written ? Tensor::empty({s.shard_numel}, DType::F32, Device::cpu()) : s.grad;
      ops::cast(landing.host, widened);
    }
    if (s.grad_written)
      ops::add_(s.grad, widened);
    else if (widened.raw_data() != s.grad.raw_data())
      s.grad.copy_from(widened);
  }
  s.grad_written = true;
  landings_.pop_front();
}

void Fsdp::finish_host_grads() {
  for (ParamShard& s : shards_) {
    if (s.device_grad.defined()) {
      s.grad.copy_from(s.device_grad);  // a group of one rank: backward summed the whole step on the device
      s.device_grad = Tensor();
      s.grad_written = true;
    }
    // A parameter nothing added to this step (unused, frozen) has a zero gradient, as without offload.
    if (!s.grad_written) {
      s.grad.zero_();
      s.grad_written = true;
    }
  }
}

}  // namespace veomni
