// Expert parallelism: dropless token exchange between the ranks of an EP group, each owning E/ep experts.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "dist/communicator.h"
#include "model/parallel_hooks.h"

namespace veomni {

class ExpertParallel final : public ExpertHooks {
 public:
  ExpertParallel(std::shared_ptr<Communicator> ep_group, int64_t num_experts);
  int64_t ep_size() const override { return group_->size(); }
  int64_t ep_rank() const override { return group_->rank(); }
  Tensor dispatch(const Tensor& permuted, const std::vector<int64_t>& global_counts,
                  std::vector<int64_t>& local_counts, std::shared_ptr<void>& state) override;
  Tensor combine(const Tensor& expert_out, const std::shared_ptr<void>& state) override;
  Tensor combine_backward(const Tensor& d_permuted_out, const std::shared_ptr<void>& state) override;
  Tensor dispatch_backward(const Tensor& d_local, const std::shared_ptr<void>& state) override;

 private:
  struct Exchange;
  // Rows in this rank's permuted order (by global expert) -> rows of the local experts, expert-major.
  Tensor to_experts(const Tensor& rows, const Exchange& ex) const;
  // The inverse movement.
  Tensor from_experts(const Tensor& rows, const Exchange& ex) const;
  std::vector<int64_t> source_major_offsets(const Exchange& ex) const;
  void regroup(const Tensor& src, Tensor& dst, const Exchange& ex, bool to_expert_major) const;

  std::shared_ptr<Communicator> group_;
  int64_t num_experts_;
  int64_t local_experts_;
};

}  // namespace veomni
