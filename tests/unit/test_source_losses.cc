// Unit tests of train/source_losses: token losses summed per source through the packed row's spans (also for an
// SP slice that starts inside a sample), the step's loss_<name> / tokens_<name>, and absent sources holding their loss.
#include <gtest/gtest.h>

#include <cmath>

#include "data/batch.h"
#include "train/source_losses.h"

using namespace veomni;

namespace {

// A slice of `targets.size()` rows starting at row `offset` of the packed row.
MultimodalBatch slice(const std::vector<int64_t>& targets, int64_t offset,
                      std::vector<MultimodalBatch::SourceSpan> spans) {
  MultimodalBatch b;
  b.text.target_ids = Tensor::empty({static_cast<int64_t>(targets.size())}, DType::I64);
  for (size_t i = 0; i < targets.size(); ++i) b.text.target_ids.data<int64_t>()[i] = targets[i];
  b.text.sp_offset = offset;
  b.source_spans = std::move(spans);
  return b;
}

Tensor losses(const std::vector<float>& values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::F32);
  for (size_t i = 0; i < values.size(); ++i) t.data<float>()[i] = values[i];
  return t;
}

TEST(SourceLosses, SumsEachSourcesTargetsAcrossSpSlices) {
  // Row of 8: sample 0 (source 1) rows 0-2, sample 1 (source 0) rows 3-6, padding row 7; last token of each sample
  // and the padding have no target.
  const std::vector<MultimodalBatch::SourceSpan> spans = {{0, 3, 1}, {3, 7, 0}};
  const std::vector<int64_t> targets = {5, 6, kIgnoreIndex, 7, 8, 9, kIgnoreIndex, kIgnoreIndex};
  const std::vector<float> loss = {1, 2, 0, 3, 4, 5, 0, 0};
  double whole[4] = {0, 0, 0, 0};
  add_source_losses(slice(targets, 0, spans), losses(loss), whole, 2);
  EXPECT_DOUBLE_EQ(whole[0], 12.0);  // source 0: 3 + 4 + 5
  EXPECT_DOUBLE_EQ(whole[1], 3.0);
  EXPECT_DOUBLE_EQ(whole[2], 3.0);   // source 1: 1 + 2
  EXPECT_DOUBLE_EQ(whole[3], 2.0);
  // Two SP slices of 4 rows each add up to the same sums.
  double parts[4] = {0, 0, 0, 0};
  add_source_losses(slice({5, 6, kIgnoreIndex, 7}, 0, spans), losses({1, 2, 0, 3}), parts, 2);
  add_source_losses(slice({8, 9, kIgnoreIndex, kIgnoreIndex}, 4, spans), losses({4, 5, 0, 0}), parts, 2);
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(parts[i], whole[i]) << i;
  // No spans (one dataset): nothing is added.
  double none[2] = {0, 0};
  add_source_losses(slice(targets, 0, {}), losses(loss), none, 1);
  EXPECT_EQ(none[0], 0.0);
}

TEST(SourceLosses, StepMetricsAndAbsentSourcesHoldTheirLastLoss) {
  const double sums[4] = {12.0, 3.0, 0.0, 0.0};
  auto values = source_loss_metrics({"math", "code"}, sums);
  ASSERT_EQ(values.size(), 4u);
  EXPECT_EQ(values[0].first, "loss_math");
  EXPECT_DOUBLE_EQ(values[0].second, 4.0);
  EXPECT_EQ(values[1].first, "loss_code");
  EXPECT_TRUE(std::isnan(values[1].second));
  EXPECT_EQ(values[3].first, "tokens_code");
  EXPECT_EQ(values[3].second, 0.0);
  MetricsLog log;
  auto first = values;
  hold_absent_source_losses(first, log);
  EXPECT_EQ(first[1].second, 0.0);  // before its first step
  log.append({{"loss_math", 1.0}, {"loss_code", 2.5}, {"tokens_math", 1}, {"tokens_code", 4}});
  hold_absent_source_losses(values, log);
  EXPECT_DOUBLE_EQ(values[0].second, 4.0);  // present: its own value
  EXPECT_DOUBLE_EQ(values[1].second, 2.5);  // absent: the last step's
}

}  // namespace
