// Greedy decode runs queued ahead of the host: the runs, their continuations and the copies of their ids.
#include "generate/greedy_pipeline.h"

#include <utility>

#include "core/error.h"

namespace veomni {

GreedyPipeline::GreedyPipeline(DecodeSteps& decode, int64_t most_steps, int64_t batch) : decode_(decode) {
  for (int i = 0; i < 2; ++i) {
    host_ids_[i].assign(static_cast<size_t>(most_steps * batch), 0);
    pins_[i] = backend::PinnedHostRange(host_ids_[i].data(), host_ids_[i].size() * sizeof(int64_t));
  }
}

void GreedyPipeline::queue_copy(Run& run, const Tensor& chosen) {
  const size_t bytes = static_cast<size_t>(chosen.numel()) * sizeof(int64_t);
  VEOMNI_CHECK(chosen.dtype() == DType::I64 && bytes <= host_ids_[run.buffer].size() * sizeof(int64_t),
               "greedy ids {} for a host buffer of {} ids", chosen.describe(), host_ids_[run.buffer].size());
  run.copy = backend::AsyncCopy(host_ids_[run.buffer].data(), Device::cpu(), chosen.raw_data(), chosen.device(), bytes);
  steps_ += run.steps;
  if (decode_.graphed()) graph_steps_ += run.steps;
}

void GreedyPipeline::start(const DecodeRows& step, std::vector<int64_t> rows, int64_t steps) {
  VEOMNI_CHECK(!pending_ && !next_, "a greedy run started while another is pending");
  Run run;
  run.rows = std::move(rows);
  run.steps = steps;
  queue_copy(run, decode_.run_greedy(step, steps));
  pending_ = std::move(run);
}

void GreedyPipeline::queue_next() {
  VEOMNI_CHECK(pending_ && pending_->chainable && !next_, "a greedy continuation without a chainable pending run");
  Run run;
  run.rows = pending_->rows;
  run.steps = pending_->steps;
  run.buffer = 1 - pending_->buffer;
  queue_copy(run, decode_.continue_greedy(static_cast<int64_t>(run.rows.size()), run.steps));
  next_ = std::move(run);
}

void GreedyPipeline::finish(const std::function<bool(int64_t, int64_t)>& take) {
  VEOMNI_CHECK(pending_.has_value(), "no pending greedy run to finish");
  pending_->copy.wait();
  const int64_t* ids = host_ids_[pending_->buffer].data();
  const int64_t n = static_cast<int64_t>(pending_->rows.size());
  bool ended = false;
  for (int64_t k = 0; k < pending_->steps; ++k)
    for (int64_t r = 0; r < n; ++r) ended = take(pending_->rows[static_cast<size_t>(r)], ids[k * n + r]) || ended;
  pending_.reset();
  if (!next_) return;
  next_->chainable = !ended;
  pending_ = std::move(next_);
  next_.reset();
}

}  // namespace veomni
