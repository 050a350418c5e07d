// Unit tests of data/mix_plan and the mixed EpochPlans: weights become draw ratios, each source follows its own
// shuffled passes, the order is a pure function of (seed, sources, epoch), and zero weights are never drawn.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "data/batch_plan.h"
#include "data/mix_plan.h"
#include "train/epoch_plans.h"

using namespace veomni;

namespace {

BatchPlanOptions batch_plan_options(uint64_t seed, bool shuffle = true) {
  BatchPlanOptions o;
  o.seed = seed;
  o.shuffle = shuffle;
  o.max_seq_len = 8;
  o.token_budget = 16;
  o.micro_batches_per_step = 2;
  return o;
}

// Which source each concatenated index belongs to.
size_t source_of(const std::vector<MixSource>& sources, int64_t index) {
  const std::vector<int64_t> first = mix_first_indices(sources);
  size_t s = 0;
  while (s + 1 < sources.size() && index >= first[s + 1]) ++s;
  return s;
}

TEST(MixPlan, DrawRatiosFollowTheWeightsOver10kSamples) {
  const std::vector<MixSource> sources = {{2000, 0.6}, {7900, 0.3}, {100, 0.1}};
  const std::vector<int64_t> order = mixed_epoch_order(sources, 0, batch_plan_options(7));
  ASSERT_EQ(order.size(), 10000u);
  std::vector<double> drawn(3, 0);
  for (int64_t index : order) drawn[source_of(sources, index)] += 1;
  EXPECT_NEAR(drawn[0] / 10000, 0.6, 0.015);
  EXPECT_NEAR(drawn[1] / 10000, 0.3, 0.015);
  EXPECT_NEAR(drawn[2] / 10000, 0.1, 0.01);
}

TEST(MixPlan, EachSourceFollowsItsOwnShuffledPassesAndRestartsWhenExhausted) {
  const std::vector<MixSource> sources = {{50, 1.0}, {1000, 1.0}};
  const std::vector<int64_t> order = mixed_epoch_order(sources, 3, batch_plan_options(11));
  std::vector<int64_t> small;  // source 0's samples in draw order
  for (int64_t index : order)
    if (source_of(sources, index) == 0) small.push_back(index);
  ASSERT_GT(small.size(), 150u);  // drawn about 525 times: oversampled, about ten passes
  std::vector<std::vector<int64_t>> passes;
  for (size_t begin = 0; begin + 50 <= small.size(); begin += 50)
    passes.emplace_back(small.begin() + static_cast<std::ptrdiff_t>(begin),
                        small.begin() + static_cast<std::ptrdiff_t>(begin + 50));
  std::vector<int64_t> identity(50);
  for (int64_t i = 0; i < 50; ++i) identity[static_cast<size_t>(i)] = i;
  for (const auto& pass : passes) {
    std::vector<int64_t> sorted = pass;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, identity) << "a pass must be a permutation of the source";
  }
  EXPECT_NE(passes[0], passes[1]) << "a restarted source must be reshuffled";
  EXPECT_NE(passes[0], identity);
  // The large source is drawn about 525 times: no repeat within its first pass.
  std::set<int64_t> large;
  for (int64_t index : order) {
    if (source_of(sources, index) == 1) {
      EXPECT_TRUE(large.insert(index).second) << index;
    }
  }
}

TEST(MixPlan, PureFunctionOfSeedSourcesAndEpoch) {
  const std::vector<MixSource> sources = {{300, 2.0}, {200, 1.0}};
  const std::vector<int64_t> a = mixed_epoch_order(sources, 1, batch_plan_options(5));
  EXPECT_EQ(a, mixed_epoch_order(sources, 1, batch_plan_options(5)));
  EXPECT_NE(a, mixed_epoch_order(sources, 1, batch_plan_options(6)));
  EXPECT_NE(a, mixed_epoch_order(sources, 2, batch_plan_options(5)));
  EXPECT_NE(a, mixed_epoch_order({{300, 1.0}, {200, 2.0}}, 1, batch_plan_options(5)));
}

TEST(MixPlan, ZeroWeightIsNeverDrawnAndAddsNoDraws) {
  const std::vector<MixSource> sources = {{100, 0.0}, {40, 1.0}, {60, 3.0}};
  EXPECT_EQ(mixed_epoch_draws(sources), 100);
  for (int64_t index : mixed_epoch_order(sources, 0, batch_plan_options(1))) {
    EXPECT_GE(index, 100);
  }
  const std::vector<MixSource> last_zero = {{40, 1.0}, {10, 0.0}};
  for (int64_t index : mixed_epoch_order(last_zero, 0, batch_plan_options(1))) {
    EXPECT_LT(index, 40);
  }
}

TEST(MixPlan, WithoutShuffleEachSourceIsReadInFileOrder) {
  const std::vector<MixSource> sources = {{30, 1.0}, {20, 1.0}};
  std::vector<int64_t> per_source[2];
  for (int64_t index : mixed_epoch_order(sources, 0, batch_plan_options(3, false)))
    per_source[source_of(sources, index)].push_back(index);
  for (size_t i = 0; i < per_source[0].size(); ++i) EXPECT_EQ(per_source[0][i], static_cast<int64_t>(i % 30));
  for (size_t i = 0; i < per_source[1].size(); ++i) EXPECT_EQ(per_source[1][i], 30 + static_cast<int64_t>(i % 20));
}

TEST(MixPlan, EpochPlansPackTheMixedOrderAndCountEveryEpoch) {
  const std::vector<MixSource> mix = {{40, 1.0}, {25, 2.0}};
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < 65; ++i) lengths.push_back(1 + (i * 7) % 8);
  EpochPlans plans(lengths, batch_plan_options(9), 3, -1, mix);
  int64_t total = 0;
  for (int64_t e = 0; e < 3; ++e) {
    const std::vector<StepPlan> expected =
        plan_order(lengths, mixed_epoch_order(mix, e, batch_plan_options(9)), batch_plan_options(9));
    EXPECT_EQ(plans.steps_in_epoch(e), static_cast<int64_t>(expected.size()));
    EXPECT_EQ(plans.steps_before(e), total);
    const std::vector<StepPlan>& got = plans.epoch(e);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t s = 0; s < got.size(); ++s)
      for (size_t m = 0; m < got[s].micro_batches.size(); ++m)
        EXPECT_EQ(got[s].micro_batches[m].samples, expected[s].micro_batches[m].samples);
    total += static_cast<int64_t>(expected.size());
  }
  EXPECT_EQ(plans.total_steps(), total);
  // Capped epochs (train.max_steps) are counted the same way.
  EpochPlans capped(lengths, batch_plan_options(9), 3, 2, mix);
  EXPECT_EQ(capped.total_steps(), 6);
}

}  // namespace
