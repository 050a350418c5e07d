// The seams through which parallelism plugs into a model without the model knowing MPI or NCCL.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "model/param.h"

namespace veomni {

// FSDP: called around each ParamGroup's use. The default (single process) does nothing: values stay materialised.
class ParamHooks {
 public:
  virtual ~ParamHooks() = default;
  virtual void before_forward(ParamGroup&) {}
  virtual void after_forward(ParamGroup&) {}
  virtual void before_backward(ParamGroup&) {}
  // Gradients of the group are complete for this micro-batch: FSDP reduce-scatters (or defers to the last one).
  virtual void after_backward(ParamGroup&) {}
};

// Ulysses sequence parallelism around attention. Inputs are [S_local, H, D]; the default is the identity.
class SequenceHooks {
 public:
  virtual ~SequenceHooks() = default;
  virtual int64_t sp_size() const { return 1; }
  // [S/P, H, D] -> [S, H/P, D]. H % P == 0: when P > kv heads the attention layer repeats each kv head P/kv times
  // (consecutively, as repeat_kv) before the call, and sums the copies' gradients after heads_to_seq.
  virtual Tensor seq_to_heads(const Tensor& x) { return x; }
  // [S, H/P, D] -> [S/P, H, D]
  virtual Tensor heads_to_seq(const Tensor& x) { return x; }
  // Sums a small host vector over the SP group (router statistics for the aux loss).
  virtual void allreduce_sum(std::vector<double>&) {}
};

// Expert parallelism. The default keeps every expert local. Each dispatch returns an opaque exchange state that
// the MoE layer keeps for combine and for the backward pair (one per layer and micro-batch).
class ExpertHooks {
 public:
  virtual ~ExpertHooks() = default;
  virtual int64_t ep_size() const { return 1; }
  virtual int64_t ep_rank() const { return 0; }
  // permuted: this rank's rows grouped by global expert (global_counts[e] rows for expert e, all E experts).
  // Returns the rows this rank's local experts process, grouped by local expert (local_counts[e_local]).
  virtual Tensor dispatch(const Tensor& permuted, const std::vector<int64_t>& global_counts,
                          std::vector<int64_t>& local_counts, std::shared_ptr<void>& state) {
    (void)state;
    local_counts = global_counts;
    return permuted;
  }
  // Inverse of dispatch: expert outputs back to this rank, in the permuted order it sent.
  virtual Tensor combine(const Tensor& expert_out, const std::shared_ptr<void>& state) {
    (void)state;
    return expert_out;
  }
  // Backward: gradient w.r.t. combine's output (permuted order) -> gradient w.r.t. expert_out (local order).
  virtual Tensor combine_backward(const Tensor& d_permuted_out, const std::shared_ptr<void>& state) {
    (void)state;
    return d_permuted_out;
  }
  // Backward: gradient w.r.t. dispatch's output (local order) -> gradient w.r.t. permuted (this rank's order).
  virtual Tensor dispatch_backward(const Tensor& d_local, const std::shared_ptr<void>& state) {
    (void)state;
    return d_local;
  }
};

struct ParallelHooks {
  ParamHooks* params = nullptr;      // null: nothing to do
  SequenceHooks* sequence = nullptr;
  ExpertHooks* experts = nullptr;
};

}  // namespace veomni
