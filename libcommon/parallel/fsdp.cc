// FSDP gather / release / reduce-scatter over MPI or NCCL communicators.
#include "parallel/fsdp.h"

#include <algorithm>
#include <cstring>

#include "kernels/ops.h"
#include "parallel/shard_spec.h"

namespace veomni {

namespace {

// A flat f32 view of the first n elements of t.
Tensor flat_prefix(const Tensor& t, int64_t n) { return t.view({t.numel()}).slice(0, n); }

}  // namespace

Fsdp::Fsdp(ParamStore& store, const DeviceMesh& mesh, DType compute_dtype, DType reduce_dtype)
    : store_(store), mesh_(mesh), compute_dtype_(compute_dtype), reduce_dtype_(reduce_dtype) {
  shards_.reserve(store.all().size());
  for (const auto& owned : store.all()) {
    Parameter* p = owned.get();
    const ShardSpec spec = shard_spec_for(p->shape, p->is_expert, mesh_.shape, mesh_.rank);
    ParamShard s;
    s.param = p;
    s.group = p->is_expert ? mesh_.ep_fsdp.get() : mesh_.world.get();
    VEOMNI_CHECK(s.group->size() == spec.group_size && s.group->rank() == spec.group_rank,
                 "FSDP: group of {} is rank {}/{} but the shard spec says {}/{}", p->name, s.group->rank(),
                 s.group->size(), spec.group_rank, spec.group_size);
    VEOMNI_CHECK(p->local_begin == spec.rows_begin && p->local_row_end() == spec.rows_end,
                 "FSDP: parameter {} holds rows [{}, {}) but this rank's shard spec says [{}, {})", p->name,
                 p->local_begin, p->local_row_end(), spec.rows_begin, spec.rows_end);
    s.local_numel = spec.local_numel;
    s.shard_numel = spec.shard_numel;
    const Device device = p->value.defined() ? p->value.device() : Device::cpu();
    s.master = Tensor::zeros({s.shard_numel}, DType::F32, device);
    s.grad = Tensor::zeros({s.shard_numel}, DType::F32, device);
    VEOMNI_CHECK(p->value.defined() && p->value.numel() == s.local_numel, "FSDP: parameter {} is not materialised ({})",
                 p->name, p->value.describe());
    Tensor mine = flat_prefix(s.master, spec.flat_end - spec.flat_begin);
    Tensor full = p->value.dtype() == DType::F32 ? p->value : p->value.to_dtype(DType::F32);
    mine.copy_from(full.view({s.local_numel}).slice(spec.flat_begin, spec.flat_end));
    s.aliased = spec.group_size == 1 && compute_dtype_ == DType::F32;
    if (s.aliased) {
      p->value = flat_prefix(s.master, s.local_numel).view(p->local_shape());
      p->grad = flat_prefix(s.grad, s.local_numel).view(p->local_shape());
    } else {
      p->value = Tensor();
      p->grad = Tensor();
    }
    shards_.push_back(std::move(s));
  }
}

ParamShard& Fsdp::shard_of(const Parameter* p) {
  // Parameters are registered once and in order, so the store index is the shard index.
  const auto& all = store_.all();
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].get() == p) return shards_[i];
  VEOMNI_CHECK(false, "FSDP: unknown parameter {}", p->name);
}

bool Fsdp::owns(const ParamGroup& group, const Parameter* p) const {
  return p->group >= 0 && &store_.groups()[static_cast<size_t>(p->group)] == &group;
}

Tensor Fsdp::gather_rows(const ParamShard& s) const {
  const int64_t n = s.group->size();
  Tensor buffer = Tensor::empty({s.shard_numel * n}, DType::F32, s.master.device());
  s.group->allgather(s.master, buffer);
  return flat_prefix(buffer, s.local_numel).view(s.param->local_shape());
}

void Fsdp::gather(ParamGroup& group) {
  for (Parameter* p : group.params) {
    ParamShard& s = shard_of(p);
    if (s.aliased || p->value.defined()) continue;  // a shared (tied) parameter may still be materialised
    if (compute_dtype_ == DType::F32) {
      p->value = gather_rows(s);
      continue;
    }
    // Casting is element-wise, so casting the shard and gathering equals gathering and casting.
    Tensor shard = Tensor::empty({s.shard_numel}, compute_dtype_, s.master.device());
    ops::cast(s.master, shard);
    if (s.group->size() == 1) {  // nothing to gather
      p->value = flat_prefix(shard, s.local_numel).view(p->local_shape());
      continue;
    }
    Tensor buffer = Tensor::empty({s.shard_numel * s.group->size()}, compute_dtype_, s.master.device());
    s.group->allgather(shard, buffer);
    p->value = flat_prefix(buffer, s.local_numel).view(p->local_shape());
  }
}

void Fsdp::release(ParamGroup& group, bool reduce_grads) {
  for (Parameter* p : group.params) {
    ParamShard& s = shard_of(p);
    if (s.aliased) continue;
    // A tied parameter listed in a later group keeps its gradient until its owner group finishes backward, since
    // the owner's backward (the embedding, first layer) runs last and adds its own part.
    if (!owns(group, p)) {
      if (!reduce_grads) p->value = Tensor();
      continue;
    }
    if (reduce_grads && p->grad.defined() && s.group->size() == 1) {
      p->grad = Tensor();  // a view of s.grad: already accumulated
    } else if (reduce_grads && p->grad.defined()) {
      const int64_t n = s.group->size();
      const Device device = p->grad.device();
      Tensor padded = Tensor::zeros({s.shard_numel * n}, reduce_dtype_, device);
      if (reduce_dtype_ == DType::F32) {
        flat_prefix(padded, s.local_numel).copy_from(p->grad.view({s.local_numel}));
      } else {
        Tensor head = flat_prefix(padded, s.local_numel);
        ops::cast(p->grad.view({s.local_numel}), head);
      }
      Tensor reduced = Tensor::empty({s.shard_numel}, reduce_dtype_, device);
      s.group->reduce_scatter_sum(padded, reduced);
      if (reduce_dtype_ != DType::F32) {
        Tensor widened = Tensor::empty({s.shard_numel}, DType::F32, device);
        ops::cast(reduced, widened);
        reduced = widened;
      }
      ops::add_(s.grad, reduced);
      p->grad = Tensor();
    }
    p->value = Tensor();
  }
}

void Fsdp::attach_unsharded_grads(ParamGroup& group) {
  for (Parameter* p : group.params) {
    ParamShard& s = shard_of(p);
    if (s.aliased || s.group->size() != 1 || p->grad.defined()) continue;
    p->grad = flat_prefix(s.grad, s.local_numel).view(p->local_shape());
  }
}

void Fsdp::zero_grads() {
  for (ParamShard& s : shards_) s.grad.zero_();
}

int64_t Fsdp::shard_bytes() const {
  int64_t bytes = 0;
  for (const ParamShard& s : shards_) bytes += static_cast<int64_t>(s.master.nbytes() + s.grad.nbytes());
  return bytes;
}

}  // namespace veomni
