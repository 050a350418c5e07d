// Unit tests of the trainer's micro-batch read-ahead: the same batches in the same order as inline collation, the
// work on another thread, and a failed read surfacing on the caller's thread, with its message, when its step asks.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "train/batch_prefetch.h"

using namespace veomni;

namespace {

// A step of `micro_batches` micro-batches whose samples are numbered from `first`.
StepPlan plan_of(int64_t first, int micro_batches) {
  StepPlan plan;
  for (int m = 0; m < micro_batches; ++m) plan.micro_batches.push_back({{first + 2 * m, first + 2 * m + 1}, 2});
  return plan;
}

// "Collates" a step: one batch per micro-batch whose ids are its sample indices; sample 13 is bad data.
BatchPrefetch::Batches collate(const StepPlan& plan) {
  BatchPrefetch::Batches batches;
  for (const MicroBatchPlan& micro : plan.micro_batches) {
    for (int64_t sample : micro.samples)
      VEOMNI_INPUT_CHECK(sample != 13, "data.h5 sample {}: input_ids[2] = 9999 is outside the model vocabulary",
                         sample);
    MultimodalBatch batch;
    batch.text.input_ids = Tensor::from_vector(micro.samples, {static_cast<int64_t>(micro.samples.size())});
    batches.push_back(std::move(batch));
  }
  return batches;
}

std::vector<int64_t> ids_of(const BatchPrefetch::Batches& batches) {
  std::vector<int64_t> ids;
  for (const MultimodalBatch& b : batches)
    ids.insert(ids.end(), b.text.input_ids.data<int64_t>(),
               b.text.input_ids.data<int64_t>() + b.text.input_ids.numel());
  return ids;
}

}  // namespace

// The trainer's pattern: take step k, start step k + 1, compute. Every step gets exactly inline collation's batches.
TEST(BatchPrefetch, GivesInlineCollationsBatchesInOrder) {
  std::vector<StepPlan> steps;
  for (int s = 0; s < 5; ++s) steps.push_back(plan_of(100 + 10 * s, 1 + s % 3));
  std::mutex mutex;
  std::vector<std::thread::id> threads;
  BatchPrefetch prefetch([&](const StepPlan& plan) {
    std::lock_guard lock(mutex);
    threads.push_back(std::this_thread::get_id());
    return collate(plan);
  });
  for (size_t s = 0; s < steps.size(); ++s) {
    const BatchPrefetch::Batches got = prefetch.take(static_cast<int64_t>(s) + 1, steps[s]);
    if (s + 1 < steps.size()) prefetch.start(static_cast<int64_t>(s) + 2, steps[s + 1]);
    EXPECT_EQ(ids_of(got), ids_of(collate(steps[s]))) << "step " << s + 1;
    EXPECT_EQ(got.size(), steps[s].micro_batches.size());
  }
  // The first step is collated inline (nothing started it), the later ones on another thread, each once.
  ASSERT_EQ(threads.size(), steps.size());
  EXPECT_EQ(threads[0], std::this_thread::get_id());
  for (size_t s = 1; s < threads.size(); ++s) EXPECT_NE(threads[s], std::this_thread::get_id()) << s;
}

// A step other than the one started (an epoch boundary, a resumed run) is collated inline; the started one dropped.
TEST(BatchPrefetch, AnotherStepIsCollatedInline) {
  BatchPrefetch prefetch(collate);
  prefetch.start(2, plan_of(0, 1));
  EXPECT_EQ(ids_of(prefetch.take(7, plan_of(40, 2))), (std::vector<int64_t>{40, 41, 42, 43}));
  EXPECT_EQ(ids_of(prefetch.take(8, plan_of(50, 1))), (std::vector<int64_t>{50, 51}));
}

// Bad data read in the background fails the step that needs it, on the caller's thread, with the sample named; the
// step before it is not affected.
TEST(BatchPrefetch, ErrorsSurfaceWhenTheirStepIsTaken) {
  BatchPrefetch prefetch(collate);
  const StepPlan good = plan_of(0, 2), bad = plan_of(12, 1);  // samples 12 and 13
  ASSERT_NO_THROW(prefetch.take(1, good));
  prefetch.start(2, bad);
  try {
    prefetch.take(2, bad);
    FAIL() << "the bad sample was not reported";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("data.h5 sample 13: input_ids[2] = 9999 is outside"), std::string::npos)
        << e.what();
  }
  // Inline collation reports the very same error.
  EXPECT_THROW(prefetch.take(2, bad), InputError);
}

// A read-ahead nobody asks for (the run stopped) is waited for and its error dropped, not thrown from a destructor.
TEST(BatchPrefetch, AnUnclaimedFailureIsDropped) {
  EXPECT_NO_THROW({
    BatchPrefetch prefetch(collate);
    prefetch.start(5, plan_of(12, 1));
  });
}
