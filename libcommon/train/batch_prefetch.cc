// One step of read-ahead for the trainer's micro-batches, on a std::async thread.
#include "train/batch_prefetch.h"

#include <utility>

namespace veomni {

BatchPrefetch::BatchPrefetch(Collate collate) : collate_(std::move(collate)) {}

BatchPrefetch::~BatchPrefetch() { drop(); }

void BatchPrefetch::drop() {
  if (pending_.valid()) pending_.wait();
  pending_ = {};
  pending_step_ = -1;
}

void BatchPrefetch::start(int64_t step, StepPlan plan) {
  drop();
  pending_ = std::async(std::launch::async, [this, plan = std::move(plan)] { return collate_(plan); });
  pending_step_ = step;
}

BatchPrefetch::Batches BatchPrefetch::take(int64_t step, const StepPlan& plan) {
  if (pending_.valid() && pending_step_ == step) {
    std::future<Batches> ready = std::move(pending_);
    pending_step_ = -1;
    return ready.get();
  }
  drop();
  return collate_(plan);
}

}  // namespace veomni
