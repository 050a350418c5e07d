// FSDP gather / release / reduce-scatter over MPI or NCCL communicators, with prefetched gathers and deferred sums.
#include "parallel/fsdp.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "kernels/ops.h"
#include "parallel/shard_spec.h"

namespace veomni {

namespace {

constexpr size_t kNoGroup = SIZE_MAX;

// A flat view of the first n elements of t.
Tensor flat_prefix(const Tensor& t, int64_t n) { return t.view({t.numel()}).slice(0, n); }

// Elements of deferred start values produced at a time: host buffers stay this small whatever the parameter's size.
constexpr int64_t kStartValueChunk = int64_t{1} << 22;

// Writes elements [begin, begin + dst.numel()) of a deferred parameter's start values (zeros when it has none) into
// the flat tensor dst, of any dtype and device, chunk by chunk. The numbers and the cast are those of the
// materialised path (f32 values, cast by ops::cast on dst's device), so the shards hold the same bits.
void fill_from_start_values(const Parameter& p, int64_t begin, Tensor dst) {
  const int64_t count = dst.numel();
  if (!p.start_values || count == 0) return;  // dst is zeros already
  const bool direct = dst.is_cpu() && dst.dtype() == DType::F32;
  const int64_t chunk = std::min(kStartValueChunk, count);
  Tensor host = direct ? Tensor() : Tensor::empty({chunk}, DType::F32);
  for (int64_t done = 0; done < count; done += chunk) {
    const int64_t n = std::min(chunk, count - done);
    Tensor part = dst.slice(done, done + n);
    if (direct) {
      p.start_values(begin + done, n, part.data<float>());
      continue;
    }
    Tensor values = host.slice(0, n);
    p.start_values(begin + done, n, values.data<float>());
    if (!dst.is_cpu()) values = values.to(dst.device());
    if (dst.dtype() == DType::F32)
      part.copy_from(values);
    else
      ops::cast(values, part);
  }
}

}  // namespace

Fsdp::Fsdp(ParamStore& store, const DeviceMesh& mesh, DType compute_dtype, DType reduce_dtype, bool overlap,
           bool offload)
    : store_(store), mesh_(mesh), compute_dtype_(compute_dtype), reduce_dtype_(reduce_dtype), overlap_(overlap),
      offload_(offload) {
  shards_.reserve(store.all().size());
  const std::unordered_map<const Parameter*, Tensor> pooled = pooled_frozen_shards();
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
    if (p->deferred) {
      VEOMNI_CHECK(!p->value.defined(), "FSDP: deferred parameter {} holds a value", p->name);
      compute_device_ = store.deferred_device();
    } else {
      compute_device_ = p->value.defined() ? p->value.device() : Device::cpu();
      VEOMNI_CHECK(p->value.defined() && p->value.numel() == s.local_numel,
                   "FSDP: parameter {} is not materialised ({})", p->name, p->value.describe());
    }
    if (!p->trainable) {
      // LoRA's frozen base: no optimizer state, so offload leaves it where it is, on the compute device.
      const auto slot = pooled.find(p);
      take_frozen_values(s, spec, slot == pooled.end() ? Tensor() : slot->second);
      finish_start_values(*p);
      shard_index_.emplace(p, shards_.size());
      shards_.push_back(std::move(s));
      continue;
    }
    const Device device = state_device();
    s.master = Tensor::zeros({s.shard_numel}, DType::F32, device);
    // On the compute device also with offload (the host steps it chunk by chunk); released by zero_grads() unless
    // aliased.
    s.grad = Tensor::zeros({s.shard_numel}, DType::F32, compute_device_);
    Tensor mine = flat_prefix(s.master, spec.flat_end - spec.flat_begin);
    if (p->deferred) {
      fill_from_start_values(*p, spec.flat_begin, mine);
    } else {
      Tensor full = p->value.dtype() == DType::F32 ? p->value : p->value.to_dtype(DType::F32);
      mine.copy_from(full.view({s.local_numel}).slice(spec.flat_begin, spec.flat_end));
    }
    finish_start_values(*p);
    s.aliased = spec.group_size == 1 && compute_dtype_ == DType::F32 && !offload_;
    if (s.aliased) {
      p->value = flat_prefix(s.master, s.local_numel).view(p->local_shape());
      p->grad = flat_prefix(s.grad, s.local_numel).view(p->local_shape());
    } else {
      p->value = Tensor();
      p->grad = Tensor();
    }
    shard_index_.emplace(p, shards_.size());
    shards_.push_back(std::move(s));
  }
  if (has_compute_copies()) build_compute_copies();
}

std::unordered_map<const Parameter*, Tensor> Fsdp::pooled_frozen_shards() const {
  constexpr int64_t kAlign = 64;
  struct Pool {
    Device device;
    int64_t numel = 0;
    struct Member {
      const Parameter* param;
      int64_t offset;
      int64_t numel;
    };
    std::vector<Member> members;
  };
  std::unordered_map<int64_t, Pool> pools;
  for (const auto& owned : store_.all()) {
    const Parameter* p = owned.get();
    if (p->trainable || p->group < 0) continue;
    const ShardSpec spec = shard_spec_for(p->shape, p->is_expert, mesh_.shape, mesh_.rank);
    if (spec.group_size != 1) continue;
    const Device device = p->deferred ? store_.deferred_device() : p->value.device();
    auto [it, fresh] = pools.try_emplace(p->group, Pool{device});
    Pool& pool = it->second;
    if (!fresh && pool.device != device) continue;  // keeps a buffer of its own
    pool.numel = (pool.numel + kAlign - 1) / kAlign * kAlign;
    pool.members.push_back({p, pool.numel, spec.shard_numel});
    pool.numel += spec.shard_numel;
  }
  std::unordered_map<const Parameter*, Tensor> slices;
  for (const auto& [group, pool] : pools) {
    const Tensor buffer = Tensor::zeros({pool.numel}, compute_dtype_, pool.device);
    for (const Pool::Member& m : pool.members) slices.emplace(m.param, buffer.slice(m.offset, m.offset + m.numel));
  }
  return slices;
}

void Fsdp::take_frozen_values(ParamShard& s, const ShardSpec& spec, const Tensor& pooled) const {
  Parameter* p = s.param;
  s.frozen_values = pooled.defined() ? pooled : Tensor::zeros({s.shard_numel}, compute_dtype_,
                                                              p->deferred ? compute_device_ : p->value.device());
  if (p->deferred) {
    // Only this rank's slice, made in the compute dtype: no f32 copy of it, let alone of the whole tensor.
    fill_from_start_values(*p, spec.flat_begin, flat_prefix(s.frozen_values, spec.flat_end - spec.flat_begin));
  } else {
    take_materialised_frozen_values(s, spec);
  }
  // Already in the compute dtype: a group of one computes straight from the slice (its padding is empty).
  s.aliased = spec.group_size == 1;
  p->value = s.aliased ? flat_prefix(s.frozen_values, s.local_numel).view(p->local_shape()) : Tensor();
  p->grad = Tensor();
}

void Fsdp::finish_start_values(Parameter& p) {
  p.deferred = false;
  p.start_values = nullptr;  // with it goes what it read from (an open checkpoint)
}

void Fsdp::take_materialised_frozen_values(ParamShard& s, const ShardSpec& spec) const {
  Parameter* p = s.param;
  Tensor full = p->value;
  if (full.dtype() != compute_dtype_) {  // a cast on the value's device (to_dtype is the host's)
    full = Tensor::empty(p->value.shape(), compute_dtype_, p->value.device());
    ops::cast(p->value, full);
  }
  flat_prefix(s.frozen_values, spec.flat_end - spec.flat_begin)
      .copy_from(full.view({s.local_numel}).slice(spec.flat_begin, spec.flat_end));
}

ParamShard& Fsdp::shard_of(const Parameter* p) {
  const auto it = shard_index_.find(p);
  VEOMNI_CHECK(it != shard_index_.end(), "FSDP: unknown parameter {}", p->name);
  return shards_[it->second];
}

size_t Fsdp::index_of(const ParamGroup& group) const {
  const std::vector<ParamGroup>& groups = store_.groups();
  const std::less<const ParamGroup*> before;
  VEOMNI_CHECK(!groups.empty() && !before(&group, groups.data()) && before(&group, groups.data() + groups.size()),
               "FSDP: group '{}' is not one of the store's", group.name);
  return static_cast<size_t>(&group - groups.data());
}

bool Fsdp::owns(const ParamGroup& group, const Parameter* p) const {
  return p->group >= 0 && &store_.groups()[static_cast<size_t>(p->group)] == &group;
}

Tensor Fsdp::gather_rows(const ParamShard& s) const {
  const int64_t n = s.group->size();
  // Offloaded masters are in host memory, which the GPU's collectives cannot read; frozen slices are on the device.
  const Tensor& stored = s.stored();
  const Tensor source = stored.device() == compute_device_ ? stored : stored.to(compute_device_);
  Tensor buffer = Tensor::empty({s.shard_numel * n}, source.dtype(), compute_device_);
  s.group->allgather(source, buffer);
  return flat_prefix(buffer, s.local_numel).view(s.param->local_shape());
}

size_t Fsdp::predicted_next() const {
  const size_t position = requests_.size();  // of the next request
  if (!following_ || position == 0 || position >= predicted_.size()) return kNoGroup;
  return predicted_[position];
}

void Fsdp::request(ParamGroup& group) {
  const size_t g = index_of(group);
  const size_t position = requests_.size();
  requests_.push_back(g);
  ++stats_.requests;
  following_ = following_ && position < predicted_.size() && predicted_[position] == g;
  if (kept_group_ == g) {
    ++stats_.kept;
    kept_group_ = kNoGroup;
  } else if (kept_group_ != kNoGroup) {
    ++stats_.prefetch_misses;
    release_kept_values();
  }

  if (prefetched_.group == g) {
    ++stats_.prefetch_hits;
    materialize(prefetched_);
  } else if (prefetched_.group != kNoGroup) {
    ++stats_.prefetch_misses;
    drop(prefetched_);
  }
  prefetched_ = GroupGather();

  // What the prefetch did not cover (everything without one) is gathered now, ahead of the next group's gather.
  GroupGather now = issue_gather(group);
  if (!now.empty()) ++stats_.on_demand;
  const size_t next = overlap_ ? predicted_next() : kNoGroup;
  // A group with nothing to gather (one rank, or every shard aliased) has nothing to overlap.
  if (next != kNoGroup && next != g && needs_gather(store_.groups()[next])) {
    prefetched_ = issue_gather(store_.groups()[next]);
    prefetched_.group = prefetched_.empty() ? kNoGroup : next;
  }
  materialize(now);
}

std::vector<Tensor> Fsdp::shards_in_compute_dtype(const std::vector<ParamShard*>& shards) const {
  // A 16-bit compute dtype has the copies the optimizer keeps current (casting is element-wise, so the cast shard
  // gathered equals the gathered values cast); under f32 the masters and frozen slices are the values themselves.
  if (has_compute_copies()) return compute_copies(shards);
  std::vector<Tensor> out;
  out.reserve(shards.size());
  for (const ParamShard* s : shards) out.push_back(s->stored());
  return out;
}

bool Fsdp::needs_gather(const ParamGroup& group) {
  for (Parameter* p : group.params) {
    const ParamShard& s = shard_of(p);
    if (!s.aliased && !p->value.defined() && s.group->size() > 1) return true;
  }
  return false;
}

Fsdp::GroupGather Fsdp::issue_gather(const ParamGroup& group) {
  std::vector<ParamShard*> todo;
  for (Parameter* p : group.params) {
    ParamShard& s = shard_of(p);
    if (!s.aliased && !p->value.defined()) todo.push_back(&s);  // a shared (tied) parameter may still be materialised
  }
  const std::vector<Tensor> locals = shards_in_compute_dtype(todo);
  GroupGather gather;
  // One batch per communicator, in the order of their first parameter: the same order on every rank.
  std::vector<Communicator*> comms;
  std::vector<std::vector<Tensor>> batch_locals, batch_outs;
  for (size_t i = 0; i < todo.size(); ++i) {
    const ParamShard& s = *todo[i];
    Parameter* p = s.param;
    if (s.group->size() == 1) {  // nothing to gather
      gather.values.emplace_back(p, flat_prefix(locals[i], s.local_numel).view(p->local_shape()));
      continue;
    }
    Tensor buffer = Tensor::empty({s.shard_numel * s.group->size()}, compute_dtype_, s.stored().device());
    gather.values.emplace_back(p, flat_prefix(buffer, s.local_numel).view(p->local_shape()));
    const size_t k = static_cast<size_t>(std::find(comms.begin(), comms.end(), s.group) - comms.begin());
    if (k == comms.size()) {
      comms.push_back(s.group);
      batch_locals.emplace_back();
      batch_outs.emplace_back();
    }
    batch_locals[k].push_back(locals[i]);
    batch_outs[k].push_back(buffer);
  }
  for (size_t k = 0; k < comms.size(); ++k) {
    if (overlap_) {
      gather.done.push_back(comms[k]->allgather_async(batch_locals[k], batch_outs[k]));
      continue;
    }
    for (size_t i = 0; i < batch_locals[k].size(); ++i) comms[k]->allgather(batch_locals[k][i], batch_outs[k][i]);
  }
  return gather;
}

void Fsdp::materialize(GroupGather& gather) {
  for (CollectiveHandle& done : gather.done) done.wait();
  for (auto& [p, value] : gather.values)
    if (!p->value.defined()) p->value = std::move(value);  // else materialised meanwhile: the copy is dropped
  gather = GroupGather();
}

void Fsdp::drop(GroupGather& gather) {
  // Waiting first keeps the buffers from being reused while the gather may still write them.
  for (CollectiveHandle& done : gather.done) done.wait();
  gather = GroupGather();
}

void Fsdp::release(ParamGroup& group, bool reduce_grads) {
  const size_t earlier = pending_.size();  // reductions of the groups before this one
  // The same group requested next (the head's forward, then its backward): keep its values instead of gathering
  // them again.
  const bool keep = overlap_ && !requests_.empty() && requests_.back() == index_of(group) &&
                    predicted_next() == requests_.back();
  for (Parameter* p : group.params) {
    ParamShard& s = shard_of(p);
    // A gradient computed by a backward that does not skip frozen weights: nothing keeps it.
    if (reduce_grads && s.frozen()) p->grad = Tensor();
    if (s.aliased) continue;
    // A tied parameter listed in a later group keeps its gradient until its owner group finishes backward, since
    // the owner's backward (the embedding, first layer) runs last and adds its own part.
    if (!owns(group, p)) {
      if (!reduce_grads && !keep) p->value = Tensor();
      continue;
    }
    if (reduce_grads && p->grad.defined()) {
      if (s.group->size() == 1) {
        p->grad = Tensor();  // a view of s.grad: already accumulated
      } else {
        issue_reduction(s);
      }
    }
    if (!keep) p->value = Tensor();
  }
  if (keep) {
    kept_group_ = requests_.back();
    kept_after_backward_ = reduce_grads;
  }
  // This group's reductions run while the next group computes; the ones before it have had a whole group's time.
  if (overlap_) {
    finish_reductions(earlier, true);
  } else {
    finish_reductions(pending_.size(), false);
  }
}

void Fsdp::issue_reduction(ParamShard& s) {
  Parameter* p = s.param;
  const int64_t n = s.group->size();
  const Device device = p->grad.device();
  // The send buffer: the gradient itself when it needs neither padding nor a cast (every f32-reduced tensor whose
  // size the group divides: no copy), else the gradient in reduce_dtype with a zeroed tail. The collective's handle
  // holds it until the sum has landed.
  const bool whole = s.local_numel == s.shard_numel * n;
  Tensor padded;
  if (whole && reduce_dtype_ == DType::F32 && p->grad.dtype() == DType::F32) {
    padded = p->grad.view({s.local_numel});
  } else {
    padded = Tensor::empty({s.shard_numel * n}, reduce_dtype_, device);
    Tensor head = flat_prefix(padded, s.local_numel);
    if (reduce_dtype_ == p->grad.dtype())
      head.copy_from(p->grad.view({s.local_numel}));
    else
      ops::cast(p->grad.view({s.local_numel}), head);
    if (!whole) padded.slice(s.local_numel, s.shard_numel * n).zero_();
  }
  p->grad = Tensor();
  PendingReduction pending;
  pending.shard = &s;
  pending.reduced = Tensor::empty({s.shard_numel}, reduce_dtype_, device);
  if (overlap_) {
    pending.done = s.group->reduce_scatter_sum_async(padded, pending.reduced);
  } else {
    s.group->reduce_scatter_sum(padded, pending.reduced);
  }
  pending_.push_back(std::move(pending));
}

void Fsdp::finish_reductions(size_t count, bool deferred) {
  for (size_t i = 0; i < count; ++i) {
    PendingReduction& r = pending_.front();
    r.done.wait();
    Tensor reduced = r.reduced;
    if (reduce_dtype_ != DType::F32) {
      Tensor widened = Tensor::empty({r.shard->shard_numel}, DType::F32, reduced.device());
      ops::cast(reduced, widened);
      reduced = widened;
    }
    // The first sum of the step becomes the gradient (0 + x = x) instead of being added to zeros.
    if (r.shard->grad.defined())
      ops::add_(r.shard->grad, reduced);
    else
      r.shard->grad = reduced;
    if (deferred) ++stats_.deferred_reductions;
    pending_.pop_front();
  }
}

void Fsdp::release_kept_values() {
  if (kept_group_ == kNoGroup) return;
  const ParamGroup& group = store_.groups()[kept_group_];
  // What release() would have freed: after backward a tied parameter of another group keeps its value anyway.
  for (Parameter* p : group.params)
    if (!shard_of(p).aliased && (owns(group, p) || !kept_after_backward_)) p->value = Tensor();
  kept_group_ = kNoGroup;
}

void Fsdp::attach_unsharded_grads(ParamGroup& group) {
  for (Parameter* p : group.params) {
    ParamShard& s = shard_of(p);
    if (s.aliased || s.frozen() || s.group->size() != 1 || p->grad.defined()) continue;
    if (!s.grad.defined()) s.grad = Tensor::zeros({s.shard_numel}, DType::F32, compute_device_);
    p->grad = flat_prefix(s.grad, s.local_numel).view(p->local_shape());
  }
}

void Fsdp::wait_for_gradients() {
  finish_reductions(pending_.size(), overlap_);
  if (prefetched_.group != kNoGroup) ++stats_.prefetch_misses;
  drop(prefetched_);
  if (kept_group_ != kNoGroup) ++stats_.prefetch_misses;
  kept_group_ = kNoGroup;
  // No gathered value outlives the step (kept for a request that did not come, or left by unbalanced hook calls):
  // the optimizer is about to change the masters they came from.
  for (ParamShard& s : shards_) {
    if (!s.aliased) s.param->value = Tensor();
    // A parameter nothing added to this step (unused, or in a group the optimizer does not step) has a zero
    // gradient, as before zero_grads(); a frozen one has none.
    if (!s.grad.defined() && !s.frozen()) s.grad = Tensor::zeros({s.shard_numel}, DType::F32, compute_device_);
  }
  if (!requests_.empty()) predicted_ = std::move(requests_);
  requests_.clear();
  following_ = !predicted_.empty();
}

void Fsdp::set_predicted_requests(std::vector<size_t> order) {
  VEOMNI_CHECK(requests_.empty(), "FSDP: the prediction changes between steps only ({} requests into this one)",
               requests_.size());
  for (size_t g : order)
    VEOMNI_CHECK(g < store_.groups().size(), "FSDP: predicted group {} of {}", g, store_.groups().size());
  predicted_ = std::move(order);
  following_ = !predicted_.empty();
}

void Fsdp::zero_grads() {
  wait_for_gradients();
  for (ParamShard& s : shards_) {
    if (s.frozen()) {
      s.param->grad = Tensor();
      continue;
    }
    if (s.aliased) {
      s.grad.zero_();  // the parameter's gradient is a view of it
      continue;
    }
    // Released, as torch's zero_grad(set_to_none=True): the f32 gradients (4 bytes a parameter) take no memory
    // during the forward passes, where activations peak; backward allocates each as it first adds to it.
    s.param->grad = Tensor();
    s.grad = Tensor();
  }
}

int64_t Fsdp::shard_bytes() const {
  int64_t bytes = frozen_shard_bytes();
  for (const ParamShard& s : shards_)
    if (!s.frozen())
      bytes += static_cast<int64_t>(s.master.nbytes() + s.shard_numel * static_cast<int64_t>(sizeof(float)));
  return bytes + compute_copy_bytes();
}

int64_t Fsdp::frozen_shard_bytes() const {
  int64_t bytes = 0;
  for (const ParamShard& s : shards_)
    if (s.frozen()) bytes += static_cast<int64_t>(s.frozen_values.nbytes());
  return bytes;
}

}  // namespace veomni
