// EP dispatch/combine: counts are all-gathered in the EP group, rows move with a variable all-to-all and are
// regrouped between source-major (as received) and expert-major (as the grouped GEMM wants them).
#include "parallel/expert_parallel.h"


namespace veomni {

// counts[s * E + e]: rows rank s routes to global expert e (this micro-batch, this layer).
struct ExpertParallel::Exchange {
  std::vector<int64_t> counts;
  std::vector<int64_t> send_rows, recv_rows;  // per peer rank
};

ExpertParallel::ExpertParallel(std::shared_ptr<Communicator> ep_group, int64_t num_experts)
    : group_(std::move(ep_group)), num_experts_(num_experts) {
  VEOMNI_CHECK(num_experts_ % group_->size() == 0, "{} experts over ep {}", num_experts_, group_->size());
  local_experts_ = num_experts_ / group_->size();
}

namespace {

// Copies `rows` rows of `row_bytes` from src row `from` to dst row `to`.
void copy_rows(const Tensor& src, int64_t from, Tensor& dst, int64_t to, int64_t rows, size_t row_bytes) {
  if (rows == 0) return;
  device_allocator(dst.device().type)
      .copy(static_cast<char*>(dst.raw_data()) + static_cast<size_t>(to) * row_bytes, dst.device(),
            static_cast<const char*>(src.raw_data()) + static_cast<size_t>(from) * row_bytes, src.device(),
            static_cast<size_t>(rows) * row_bytes);
}



}  // namespace

std::vector<int64_t> ExpertParallel::source_major_offsets(const Exchange& ex) const {
  const int64_t p = group_->size(), first = group_->rank() * local_experts_;
  std::vector<int64_t> offset(static_cast<size_t>(p * local_experts_));
  int64_t at = 0;
  for (int64_t s = 0; s < p; ++s)
    for (int64_t e = 0; e < local_experts_; ++e) {
      offset[static_cast<size_t>(s * local_experts_ + e)] = at;
      at += ex.counts[static_cast<size_t>(s * num_experts_ + first + e)];
    }
  return offset;
}

// Moves rows between source-major (s, e) blocks and expert-major (e, s) blocks.
void ExpertParallel::regroup(const Tensor& src, Tensor& dst, const Exchange& ex, bool to_expert_major) const {
  const size_t rb = dtype_size(src.dtype()) * static_cast<size_t>(src.dim(1));
  const int64_t p = group_->size(), first = group_->rank() * local_experts_;
  const std::vector<int64_t> offset = source_major_offsets(ex);
  int64_t expert_major_at = 0;
  for (int64_t e = 0; e < local_experts_; ++e)
    for (int64_t s = 0; s < p; ++s) {
      const int64_t n = ex.counts[static_cast<size_t>(s * num_experts_ + first + e)];
      const int64_t source_major_at = offset[static_cast<size_t>(s * local_experts_ + e)];
      if (to_expert_major)
        copy_rows(src, source_major_at, dst, expert_major_at, n, rb);
      else
        copy_rows(src, expert_major_at, dst, source_major_at, n, rb);
      expert_major_at += n;
    }
}

Tensor ExpertParallel::to_experts(const Tensor& rows, const Exchange& ex) const {
  int64_t received = 0;
  for (int64_t r : ex.recv_rows) received += r;
  Tensor source_major = Tensor::empty({received, rows.dim(1)}, rows.dtype(), rows.device());
  group_->all_to_all_rows(rows, ex.send_rows, source_major, ex.recv_rows);
  Tensor expert_major = Tensor::empty(source_major.shape(), rows.dtype(), rows.device());
  regroup(source_major, expert_major, ex, true);
  return expert_major;
}

Tensor ExpertParallel::from_experts(const Tensor& rows, const Exchange& ex) const {
  Tensor source_major = Tensor::empty(rows.shape(), rows.dtype(), rows.device());
  regroup(rows, source_major, ex, false);
  int64_t sent = 0;
  for (int64_t r : ex.send_rows) sent += r;
  Tensor back = Tensor::empty({sent, rows.dim(1)}, rows.dtype(), rows.device());
  group_->all_to_all_rows(source_major, ex.recv_rows, back, ex.send_rows);
  return back;
}

Tensor ExpertParallel::dispatch(const Tensor& permuted, const std::vector<int64_t>& global_counts,
                                std::vector<int64_t>& local_counts, std::shared_ptr<void>& state) {
  VEOMNI_CHECK(static_cast<int64_t>(global_counts.size()) == num_experts_, "EP dispatch: {} counts for {} experts",
               global_counts.size(), num_experts_);
  auto ex = std::make_shared<Exchange>();
  group_->allgather(global_counts, ex->counts);
  const int64_t p = group_->size(), me = group_->rank();
  ex->send_rows.assign(static_cast<size_t>(p), 0);
  ex->recv_rows.assign(static_cast<size_t>(p), 0);
  local_counts.assign(static_cast<size_t>(local_experts_), 0);
  for (int64_t d = 0; d < p; ++d)
    for (int64_t e = 0; e < local_experts_; ++e) {
      ex->send_rows[static_cast<size_t>(d)] += global_counts[static_cast<size_t>(d * local_experts_ + e)];
      const int64_t incoming = ex->counts[static_cast<size_t>(d * num_experts_ + me * local_experts_ + e)];
      ex->recv_rows[static_cast<size_t>(d)] += incoming;
      local_counts[static_cast<size_t>(e)] += incoming;
    }
  Tensor out = to_experts(permuted, *ex);
  state = ex;
  return out;
}

Tensor ExpertParallel::combine(const Tensor& expert_out, const std::shared_ptr<void>& state) {
  return from_experts(expert_out, *static_cast<const Exchange*>(state.get()));
}

Tensor ExpertParallel::combine_backward(const Tensor& d_permuted_out, const std::shared_ptr<void>& state) {
  return to_experts(d_permuted_out, *static_cast<const Exchange*>(state.get()));
}

Tensor ExpertParallel::dispatch_backward(const Tensor& d_local, const std::shared_ptr<void>& state) {
  return from_experts(d_local, *static_cast<const Exchange*>(state.get()));
}

}  // namespace veomni
