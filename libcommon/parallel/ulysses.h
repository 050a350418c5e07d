// Ulysses sequence parallelism: all-to-all between sequence slices and head slices around attention.
#pragma once
#include <cstdint>
#include <memory>

#include "dist/communicator.h"
#include "model/parallel_hooks.h"

namespace veomni {

class UlyssesHooks final : public SequenceHooks {
 public:
  explicit UlyssesHooks(std::shared_ptr<Communicator> sp_group) : group_(std::move(sp_group)) {}
  int64_t sp_size() const override { return group_->size(); }
  // [S/P, H, D] -> [S, H/P, D]: rank p keeps heads [p*H/P, (p+1)*H/P) of every token. H % P == 0 is required
  // (the attention layer repeats kv heads first when P > kv heads).
  Tensor seq_to_heads(const Tensor& x) override;
  // [S, H/P, D] -> [S/P, H, D], the inverse (and the adjoint) of seq_to_heads.
  Tensor heads_to_seq(const Tensor& x) override;
  void allreduce_sum(std::vector<double>& values) override { group_->allreduce_sum(values); }

 private:
  std::shared_ptr<Communicator> group_;
};

}  // namespace veomni
