// Greedy decode runs queued ahead of the host: each run's chosen ids go to the host by an async copy, and the next
// run is queued from the tables the last one advanced on the device before the host reads them, so that the device
// does not wait for the host's round trip between runs.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "generate/decode_steps.h"
#include "kernels/backend.h"

namespace veomni {

class GreedyPipeline {
 public:
  // `decode` (greedy) must outlive this. most_steps: the most steps of a run; batch: the most rows of one.
  GreedyPipeline(DecodeSteps& decode, int64_t most_steps, int64_t batch);
  GreedyPipeline(const GreedyPipeline&) = delete;
  GreedyPipeline& operator=(const GreedyPipeline&) = delete;

  // Whether a run is queued whose ids have not been handed out yet.
  bool pending() const { return pending_.has_value(); }
  // Queues `steps` greedy steps from `step` (the rows of the sequences `rows`, in its order) and the copy of their
  // ids to the host. Only without a pending run.
  void start(const DecodeRows& step, std::vector<int64_t> rows, int64_t steps);
  // Whether the pending run may go on from the device's tables: none of its sequences had ended before it was
  // queued. Only with a pending run, as are the two below.
  bool chainable() const { return pending_->chainable; }
  const std::vector<int64_t>& pending_rows() const { return pending_->rows; }
  int64_t pending_steps() const { return pending_->steps; }
  // Queues the pending run's continuation (the same rows and steps, from the tables its last step advanced) and its
  // copy, before the pending run's ids are read. Only when chainable, once per pending run.
  void queue_next();
  // Waits for the pending run's ids and hands them out in step order, take(sequence, token) returning whether that
  // token ended the sequence. The continuation, if queued, becomes the pending run; it is not chainable when a
  // sequence ended (its row was decoded on past the end: those tokens are the caller's to drop).
  void finish(const std::function<bool(int64_t sequence, int64_t token)>& take);

  int64_t steps() const { return steps_; }  // the steps queued so far, and how many of them replayed a graph
  int64_t graph_steps() const { return graph_steps_; }

 private:
  struct Run {
    std::vector<int64_t> rows;
    int64_t steps = 0;
    int buffer = 0;  // which host buffer its ids go to
    bool chainable = true;
    backend::AsyncCopy copy;
  };
  void queue_copy(Run& run, const Tensor& chosen);

  DecodeSteps& decode_;
  std::vector<int64_t> host_ids_[2];  // [most_steps, batch] each: the pending run's and its continuation's ids
  backend::PinnedHostRange pins_[2];
  std::optional<Run> pending_, next_;
  int64_t steps_ = 0, graph_steps_ = 0;
};

}  // namespace veomni
