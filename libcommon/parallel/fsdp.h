// FSDP (ZeRO-3) over the ParamStore: each rank keeps 1/N of every parameter as fp32 master weights with their
// gradient; a group's parameters are all-gathered before its forward and its backward and freed after, and
// gradients are reduce-scattered into the shards. Dense parameters shard over the world, expert parameters over
// the ranks holding the same experts (ep_fsdp).
//
// Overlap (on by default, as torch FSDP2 does it): a step is what happens between two wait_for_gradients() calls.
// Fsdp records the order in which groups are requested (before_forward / before_backward, recomputation included) in
// one step and predicts the next step's from it. When a group is requested, the all-gather of the group predicted
// next is issued at once ("prefetch"), so that on GPUs it runs on the communication stream while this group
// computes; when the group predicted next is the same one (the head's forward, then its backward), it simply stays
// gathered. after_backward issues the group's reduce-scatter and returns; the sum is added into the f32 shard
// gradients at the next after_backward (first in, first out) or at wait_for_gradients(). The values and sums are the
// same bits as without overlap (the same collectives of the same data, added in the same order per shard); a wrong
// prediction only costs time. Every rank must make the same sequence of hook calls (their collectives pair up anyway),
// so every rank predicts the same and issues the same collectives in the same order; nothing is decided from timing.
//
// Frozen parameters (Parameter::trainable false: the base model under LoRA) are held in the compute dtype only: their
// shard is that dtype's slice (bf16 under mixed precision, f32 on the CPU reference), with no f32 master, no
// gradient and no reduce-scatter; a gradient the model computes for one anyway is dropped at after_backward. Gathers
// move them as they move the others, without the cast.
// Compute copies: under a 16-bit compute dtype every trainable shard keeps its master in that dtype on the compute
// device (2 bytes a parameter, ParamShard::compute), the source of the gathers (or, on a group of one rank, the
// parameter's value itself), so no request casts. The optimizer writes them in its update's own pass
// (optimizer_target() hands a shard's copy to its AdamW slot), with the bits a cast of the updated master gives.
// masters_updated() refreshes them after any other change of the masters (a checkpoint restore).
//
// Optimizer offload (train.accelerator.fsdp_config.offload): the f32 masters of the trainable shards (every one in a
// full fine-tuning; the adapters under LoRA, whose frozen base stays as above on the compute device and has no
// compute copy) live in host memory (the optimizer then keeps its moments beside them: 12 bytes a trainable
// parameter on the host), and the gradients stay where they are without
// offload, f32 on the compute device (4 bytes a parameter there, released from zero_grads() to backward). Each shard
// keeps its compute copy (in any compute dtype). The optimizer step streams (optim/offload_stream.h): chunk by chunk
// the gradients come to the host through a small pinned ring, the host steps the masters and sends them back cast
// into those copies; optimizer_target() also hands the ring to the optimizer, and masters_updated() streams the
// copies. The arithmetic is the same, so the results are the same bits.
//
// Memory of overlap: at most one group's gathered parameters (compute dtype, full size) ahead
// of the group in use, and in backward one group's reduce-scatter buffers (its gradients in reduce_dtype padded to
// full size, and the reduced shard) until the next after_backward.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dist/device_mesh.h"
#include "kernels/backend.h"
#include "model/param.h"
#include "model/parallel_hooks.h"
#include "optim/adamw.h"
#include "optim/offload_stream.h"
#include "parallel/shard_spec.h"

namespace veomni {

struct ParamShard {
  Parameter* param = nullptr;
  Communicator* group = nullptr;  // world or ep_fsdp
  int64_t local_numel = 0;        // elements of this rank's rows of the parameter (all rows unless EP)
  int64_t shard_numel = 0;        // ceil(local_numel / group size): padded shard length
  Tensor master;                  // f32 [shard_numel]: this rank's slice of the flattened rows, zero padded
  Tensor grad;                    // f32 [shard_numel] on the compute device; undefined (zero) from zero_grads() until
                                  // backward adds to it
  bool aliased = false;           // group of one rank: value and grad are views of master/grad (no copies)
  // A frozen parameter (!param->trainable): its slice in the compute dtype, zero padded; master and grad stay
  // undefined. Undefined for a trainable one.
  Tensor frozen_values;

  bool frozen() const { return frozen_values.defined(); }
  // What this rank stores of the parameter's values: the f32 master, or the compute-dtype frozen slice.
  const Tensor& stored() const { return frozen() ? frozen_values : master; }
  // The master in the compute dtype on the compute device (what the gathers send), where Fsdp keeps compute copies
  // (has_compute_copies()) and the shard is trainable; undefined otherwise (a frozen shard's frozen_values are sent).
  Tensor compute;
};

// What overlap did since construction (tests check that prefetches are issued and used).
struct FsdpOverlapStats {
  int64_t requests = 0;             // before_forward / before_backward calls
  int64_t prefetch_hits = 0;        // requests served by the gather prefetched at the request before
  int64_t prefetch_misses = 0;      // prefetched or kept gathers dropped unused (a wrong prediction, or the step
                                    // ended first)
  int64_t kept = 0;                 // requests of a group that stayed gathered since the request before
  int64_t on_demand = 0;            // requests that had to gather (some of) their parameters on the spot
  int64_t deferred_reductions = 0;  // reduce-scatters added into the shard gradients after their after_backward
};

class Fsdp final : public ParamHooks {
 public:
  // Takes over the parameters' current values (as initialised or loaded: every rank must hold the same full rows)
  // into the shards, on the values' device, and releases the full values (except when aliased). A deferred
  // parameter (ParamStore::defer_values) has no value: its shard is made on the store's deferred device from its
  // start values, this rank's elements only, in the dtype the shard keeps; the same bits as from a materialised one. Gathers move
  // compute_dtype (the shard is cast first, so a bf16 run gathers half the bytes); gradients are reduce-scattered
  // in reduce_dtype and accumulated into the f32 shard gradients. overlap false: every collective blocks in its hook
  // (train.accelerator.fsdp_config.overlap, for debugging).
  // offload true: masters in host memory, stepped through a chunk stream (see above).
  Fsdp(ParamStore& store, const DeviceMesh& mesh, DType compute_dtype, DType reduce_dtype = DType::F32,
       bool overlap = true, bool offload = false);

  void before_forward(ParamGroup& group) override { request(group); }
  void after_forward(ParamGroup& group) override { release(group, false); }
  void before_backward(ParamGroup& group) override {
    request(group);
    attach_unsharded_grads(group);
  }
  void after_backward(ParamGroup& group) override { release(group, true); }

  // Ends the step: adds every pending reduce-scatter into the shard gradients, drops the prefetched and kept
  // gathers, and makes this step's request order the prediction for the next. Call it after the last micro-batch's
  // backward, before reading the gradients (clipping) and before the optimizer changes the masters; zero_grads()
  // calls it too.
  void wait_for_gradients();

  // The shards. Their gradients are complete (and every one allocated) only after wait_for_gradients().
  std::vector<ParamShard>& shards() { return shards_; }
  // Ends the step (wait_for_gradients) and releases the shard gradients (zeroes them when aliased): the next
  // backward allocates each on its first addition, so the f32 gradients hold no memory during the forward passes.
  void zero_grads();
  // The full tensor of this rank's rows of a parameter, gathered (collective over the parameter's group).
  Tensor gather_rows(const ParamShard& shard) const;
  // Bytes this rank holds from backward to the optimizer step: master + grad (+ compute copy) of the trainable
  // shards (the optimizer adds its two moments per trainable shard) and the compute-dtype slices of the frozen ones.
  int64_t shard_bytes() const;
  // The frozen shards' part of shard_bytes(): their compute-dtype slices.
  int64_t frozen_shard_bytes() const;

  bool overlap() const { return overlap_; }
  bool offload() const { return offload_; }
  // Whether the trainable shards keep compute copies: with offload, and under a 16-bit compute dtype.
  bool has_compute_copies() const { return offload_ || compute_dtype_ != DType::F32; }
  // The compute copies' bytes on the compute device (0 without them).
  int64_t compute_copy_bytes() const;
  // Call after the masters changed other than through an optimizer step over optimizer_target() (which refreshes
  // the copies itself), e.g. a checkpoint restore: recasts them into the compute copies that the next gathers send.
  // Without compute copies there is nothing to do.
  void masters_updated();
  // Where the masters live: the host with offload, else the compute device. Gradients are on the compute device.
  Device state_device() const { return offload_ ? Device::cpu() : compute_device_; }
  Device compute_device() const { return compute_device_; }
  // What an optimizer slot over this shard's master needs to keep its compute copy current (AdamW::add_slot): the
  // copy, and with offload the chunk stream. Empty for a shard without a copy.
  OffloadTarget optimizer_target(const ParamShard& shard);
  // Host bytes offload holds here: the masters and the stream's ring (the optimizer adds its moments); 0 without
  // offload. With the moments 12 bytes a trainable parameter plus the ring, whatever the model's size.
  int64_t offload_host_bytes() const;
  // The stream's part of it: its pinned ring (at most 2 chunks of 8 Mi elements in f32 and in the compute dtype).
  int64_t offload_buffer_bytes() const;
  // Replaces the stream by one of chunks of `elements` (tests: small chunks, so that shards cross chunk boundaries).
  // Before any optimizer slot takes optimizer_target().
  void set_offload_chunk_elements(int64_t elements);
  const FsdpOverlapStats& overlap_stats() const { return stats_; }
  // The predicted request order of the next step (group indices in the store): the last step's. Tests replace it
  // between steps to force wrong predictions.
  const std::vector<size_t>& predicted_requests() const { return predicted_; }
  void set_predicted_requests(std::vector<size_t> order);

 private:
  // The gathered values of one group's parameters, valid once the compute stream waited on `done`.
  struct GroupGather {
    size_t group = SIZE_MAX;
    std::vector<std::pair<Parameter*, Tensor>> values;
    std::vector<CollectiveHandle> done;
    bool empty() const { return values.empty(); }
  };
  // A reduce-scatter issued by after_backward whose sum is not yet in the shard gradient.
  struct PendingReduction {
    ParamShard* shard = nullptr;
    Tensor reduced;  // reduce_dtype [shard_numel]
    CollectiveHandle done;
  };

  void request(ParamGroup& group);
  void release(ParamGroup& group, bool reduce_grads);
  // Whether any of the group's parameters needs a collective to materialise (not just a view of its shard).
  bool needs_gather(const ParamGroup& group);
  // Gathers the group's parameters that hold no value (one collective batch per communicator).
  GroupGather issue_gather(const ParamGroup& group);
  // The shards' values as the gathers send them: their compute copies (frozen: slices), or under f32 their masters.
  std::vector<Tensor> shards_in_compute_dtype(const std::vector<ParamShard*>& shards) const;
  // Waits for a gather and hands its values to the parameters that still hold none.
  static void materialize(GroupGather& gather);
  static void drop(GroupGather& gather);
  // Frees what a release() with kept values left gathered (the request it was kept for did not come).
  void release_kept_values();
  void issue_reduction(ParamShard& shard);
  // Adds the first `count` pending reductions into their shard gradients, oldest first.
  void finish_reductions(size_t count, bool deferred);
  // The group the prediction says comes after the current request; SIZE_MAX when there is none.
  size_t predicted_next() const;
  // A parameter sharded over a group of one: backward accumulates straight into its shard's gradient.
  void attach_unsharded_grads(ParamGroup& group);
  // Where the frozen shards of groups of one rank live: per parameter group, one zeroed buffer in the compute dtype
  // holding them in registration order (each start rounded up to 64 elements), so that frozen weights registered one
  // after another lie one after another (Attention runs q/k/v as one GEMM over them: Tensor::join_rows). Maps each
  // such parameter to its slice.
  std::unordered_map<const Parameter*, Tensor> pooled_frozen_shards() const;
  // A frozen parameter's shard: its slice cast to the compute dtype (a view of it as the value when aliased), in
  // `pooled` when defined, else in a buffer of its own.
  void take_frozen_values(ParamShard& s, const ShardSpec& spec, const Tensor& pooled) const;
  // That slice cut from the parameter's materialised value.
  void take_materialised_frozen_values(ParamShard& s, const ShardSpec& spec) const;
  // A deferred parameter whose shard is built: no longer deferred, and its start values are released.
  static void finish_start_values(Parameter& p);
  ParamShard& shard_of(const Parameter* p);
  size_t index_of(const ParamGroup& group) const;
  bool owns(const ParamGroup& group, const Parameter* p) const;

  // Compute copies and offload (fsdp_compute_copies.cc). Allocates the compute copies of the trainable shards (one
  // buffer on the compute device), with offload the stream, and fills the copies.
  void build_compute_copies();
  // The shards' compute copies, or the frozen ones' slices (what shards_in_compute_dtype gives with copies).
  static std::vector<Tensor> compute_copies(const std::vector<ParamShard*>& shards);

  ParamStore& store_;
  DeviceMesh mesh_;
  DType compute_dtype_;
  DType reduce_dtype_;
  bool overlap_;
  bool offload_;
  Device compute_device_;
  std::vector<ParamShard> shards_;
  std::unordered_map<const Parameter*, size_t> shard_index_;

  std::vector<size_t> requests_;   // this step's requests so far
  std::vector<size_t> predicted_;  // the last step's
  bool following_ = false;         // this step's requests so far equal the prediction's first ones
  GroupGather prefetched_;         // at most one group ahead
  size_t kept_group_ = SIZE_MAX;   // released with its values kept, for a request of the same group next
  bool kept_after_backward_ = false;
  std::deque<PendingReduction> pending_;
  FsdpOverlapStats stats_;
  // The compute copies of every trainable shard (one buffer on the compute device) and, with offload, the stream.
  Tensor compute_flat_;
  std::unique_ptr<OffloadStream> stream_;
};

}  // namespace veomni
