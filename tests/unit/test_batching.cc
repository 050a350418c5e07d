// Unit tests of the batch plan (packing into micro-batches/steps) and the collator (shift, pad, SP slice).
#include <gtest/gtest.h>

#include <set>

#include "data/batch_plan.h"
#include "data/collator.h"

using namespace veomni;

TEST(BatchPlan, GreedyPackingRespectsBudgetAndDropsPartialStep) {
  BatchPlanOptions o;
  o.token_budget = 10;
  o.max_seq_len = 8;
  o.micro_batches_per_step = 2;
  o.shuffle = false;
  // lengths: 4,4 | 6,3 | 12->8 | 5 | 9 ; the fifth micro-batch makes an incomplete step and is dropped.
  const std::vector<int64_t> lengths{4, 4, 6, 3, 12, 5, 9};
  const auto steps = plan_epoch(lengths, 0, o);
  ASSERT_EQ(steps.size(), 2u);
  ASSERT_EQ(steps[0].micro_batches.size(), 2u);
  EXPECT_EQ(steps[0].micro_batches[0].samples, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(steps[0].micro_batches[0].tokens, 8);
  EXPECT_EQ(steps[0].micro_batches[1].samples, (std::vector<int64_t>{2, 3}));
  o.micro_batches_per_step = 1;
  const auto steps1 = plan_epoch(lengths, 0, o);
  ASSERT_EQ(steps1.size(), 5u);
  EXPECT_EQ(steps1[2].micro_batches[0].tokens, 8);  // truncated to max_seq_len
  EXPECT_EQ(steps1[3].micro_batches[0].samples, (std::vector<int64_t>{5}));
  EXPECT_EQ(steps1[4].micro_batches[0].samples, (std::vector<int64_t>{6}));
}

TEST(BatchPlan, ShuffleIsSeededPermutationDifferentPerEpoch) {
  BatchPlanOptions o;
  o.seed = 7;
  const auto a = epoch_order(100, 0, o), b = epoch_order(100, 0, o), c = epoch_order(100, 1, o);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(std::set<int64_t>(a.begin(), a.end()).size(), 100u);
  o.seed = 8;
  EXPECT_NE(epoch_order(100, 0, o), a);
}

TEST(BatchPlan, RejectsBudgetBelowSeqLen) {
  BatchPlanOptions o;
  o.token_budget = 4;
  o.max_seq_len = 8;
  EXPECT_THROW(plan_epoch({1, 2}, 0, o), InputError);
}

namespace {
TokenSample text_sample(std::vector<int64_t> ids, std::vector<int64_t> labels) {
  TokenSample s;
  const auto n = static_cast<int64_t>(ids.size());
  s.input_ids = Tensor::from_vector(ids, {n});
  if (!labels.empty()) s.labels = Tensor::from_vector(labels, {static_cast<int64_t>(labels.size())});
  return s;
}
std::vector<int64_t> as_vector(const Tensor& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}
}  // namespace

TEST(Collator, PacksShiftsAndMasksBoundaries) {
  CollateOptions o;
  o.max_seq_len = 16;
  const PackedRow row = pack_samples({text_sample({1, 2, 3}, {-100, 2, 3}), text_sample({4, 5}, {4, 5})}, o);
  EXPECT_EQ(as_vector(row.input_ids), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  // labels after packing: -100 2 3 | -100 5 ; shifted: 2 3 -100 5 -100
  EXPECT_EQ(as_vector(row.target_ids), (std::vector<int64_t>{2, 3, -100, 5, -100}));
  EXPECT_EQ(as_vector(row.position_ids), (std::vector<int64_t>{0, 1, 2, 0, 1}));
  EXPECT_EQ(row.cu_seqlens, (std::vector<int32_t>{0, 3, 5}));
  EXPECT_EQ(row.valid_tokens, 3);
}

TEST(Collator, PadsForSequenceParallelAndSlices) {
  CollateOptions o;
  o.max_seq_len = 4;  // the second sample is truncated to 4 tokens
  o.sp_size = 4;
  const PackedRow row = pack_samples({text_sample({1, 2, 3}, {}), text_sample({4, 5, 6, 7, 8, 9}, {})}, o);
  EXPECT_EQ(row.real_tokens, 7);
  ASSERT_EQ(row.input_ids.dim(0), 8);
  EXPECT_EQ(as_vector(row.target_ids), (std::vector<int64_t>{2, 3, -100, 5, 6, 7, -100, -100}));
  EXPECT_EQ(row.cu_seqlens, (std::vector<int32_t>{0, 3, 7, 8}));
  int64_t valid = 0;
  for (int64_t r = 0; r < 4; ++r) {
    const Batch b = slice_for_sp_rank(row, 4, r);
    EXPECT_EQ(b.input_ids.dim(0), 2);
    EXPECT_EQ(b.sp_offset, 2 * r);
    EXPECT_EQ(b.cu_seqlens, row.cu_seqlens);
    valid += b.valid_tokens;
  }
  EXPECT_EQ(valid, row.valid_tokens);
  EXPECT_EQ(as_vector(slice_for_sp_rank(row, 4, 1).input_ids), (std::vector<int64_t>{3, 4}));
}

TEST(Collator, ThreeStreamPositionsAreKept) {
  TokenSample s = text_sample({1, 2}, {});
  s.position_ids = Tensor::from_vector<int64_t>({0, 1, 0, 5, 0, 7}, {3, 2});
  CollateOptions o;
  o.sp_size = 2;
  const PackedRow row = pack_samples({s, s}, o);
  EXPECT_EQ(row.position_ids.shape(), (Shape{3, 4}));
  EXPECT_EQ(as_vector(row.position_ids), (std::vector<int64_t>{0, 1, 0, 1, 0, 5, 0, 5, 0, 7, 0, 7}));
  const Batch b = slice_for_sp_rank(row, 2, 1);
  EXPECT_EQ(as_vector(b.position_ids), (std::vector<int64_t>{0, 1, 0, 5, 0, 7}));
}

TEST(Collator, MismatchedLabelsAreAnInputError) {
  CollateOptions o;
  EXPECT_THROW(pack_samples({text_sample({1, 2, 3}, {1, 2})}, o), InputError);
}
