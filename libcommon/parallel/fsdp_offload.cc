// FSDP optimizer offload: host gradients and compute-dtype copies of the masters, and the copies between them.
#include <cstdint>
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
  compute_flat_ = Tensor::empty({total}, compute_dtype_, compute_device_);
  // The masters are cast on the host, so only compute-dtype bytes cross the bus, and the gradients come back into
  // host_grads_: those two buffers are what the copies touch, so they are the ones pinned.
  staging_ = compute_device_.is_cpu() ? compute_flat_ : Tensor::empty({total}, compute_dtype_, Device::cpu());
  pinned_.push_back(pin(host_grads_));
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
  // The same rounding as the device cast without offload (round to nearest even), so the gathers send the same bits.
  ops::cast_multi(src, dst);
  if (!compute_device_.is_cpu()) compute_flat_.copy_from(staging_);
}

std::vector<Tensor> Fsdp::compute_copies(const std::vector<ParamShard*>& shards) {
  std::vector<Tensor> out;
  out.reserve(shards.size());
  for (const ParamShard* s : shards) out.push_back(s->compute);
  return out;
}

void Fsdp::add_to_host_grad(ParamShard& s, const Tensor& reduced) {
  // The arithmetic of the device path: the first sum of the step becomes the gradient (widened exactly from
  // reduce_dtype), later ones are added in f32.
  if (!s.grad_written && reduced.dtype() == DType::F32) {
    s.grad.copy_from(reduced);
  } else {
    const Tensor host = reduced.device().is_cpu() ? reduced : reduced.to(Device::cpu());
    Tensor widened = host;
    if (host.dtype() != DType::F32) {
      widened = s.grad_written ? Tensor::empty({s.shard_numel}, DType::F32, Device::cpu()) : s.grad;
      ops::cast(host, widened);
    }
    if (s.grad_written) ops::add_(s.grad, widened);
  }
  s.grad_written = true;
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
