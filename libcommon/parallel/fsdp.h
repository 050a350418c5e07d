// FSDP (ZeRO-3) over the ParamStore: each rank keeps 1/N of every parameter as fp32 master weights with their
// gradient; a group's parameters are all-gathered before its forward and its backward and freed after, and
// gradients are reduce-scattered into the shards. Dense parameters shard over the world, expert parameters over
// the ranks holding the same experts (ep_fsdp).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/device_mesh.h"
#include "model/param.h"
#include "model/parallel_hooks.h"

namespace veomni {

struct ParamShard {
  Parameter* param = nullptr;
  Communicator* group = nullptr;  // world or ep_fsdp
  int64_t local_numel = 0;        // elements of this rank's rows of the parameter (all rows unless EP)
  int64_t shard_numel = 0;        // ceil(local_numel / group size): padded shard length
  Tensor master;                  // f32 [shard_numel]: this rank's slice of the flattened rows, zero padded
  Tensor grad;                    // f32 [shard_numel]
  bool aliased = false;           // group of one rank: value and grad are views of master/grad (no copies)
};

class Fsdp final : public ParamHooks {
 public:
  // Takes over the parameters' current values (as initialised or loaded: every rank must hold the same full rows)
  // into the shards, on the values' device, and releases the full values (except when aliased). Gathers move
  // compute_dtype (the shard is cast first, so a bf16 run gathers half the bytes); gradients are reduce-scattered
  // in reduce_dtype and accumulated into the f32 shard gradients.
  Fsdp(ParamStore& store, const DeviceMesh& mesh, DType compute_dtype, DType reduce_dtype = DType::F32);

  void before_forward(ParamGroup& group) override { gather(group); }
  void after_forward(ParamGroup& group) override { release(group, false); }
  void before_backward(ParamGroup& group) override {
    gather(group);
    attach_unsharded_grads(group);
  }
  void after_backward(ParamGroup& group) override { release(group, true); }

  std::vector<ParamShard>& shards() { return shards_; }
  void zero_grads();
  // The full tensor of this rank's rows of a parameter, gathered (collective over the parameter's group).
  Tensor gather_rows(const ParamShard& shard) const;
  // Bytes this rank holds persistently: master + grad (the optimizer adds two more f32 tensors per shard).
  int64_t shard_bytes() const;

 private:
  void gather(ParamGroup& group);
  void release(ParamGroup& group, bool reduce_grads);
  // A parameter sharded over a group of one: backward accumulates straight into its shard's gradient.
  void attach_unsharded_grads(ParamGroup& group);
  ParamShard& shard_of(const Parameter* p);
  bool owns(const ParamGroup& group, const Parameter* p) const;

  ParamStore& store_;
  DeviceMesh mesh_;
  DType compute_dtype_;
  DType reduce_dtype_;
  std::vector<ParamShard> shards_;
};

}  // namespace veomni
