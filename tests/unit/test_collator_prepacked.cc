// The collator on pre-packed rows (veomni-preprocess --pack): position resets become sequence boundaries.
#include <gtest/gtest.h>

#include "data/collator.h"

namespace veomni {
namespace {

TokenSample row_sample(const std::vector<int64_t>& ids, const std::vector<int64_t>& labels,
                       const std::vector<int64_t>& positions) {
  const auto n = static_cast<int64_t>(ids.size());
  return TokenSample{Tensor::from_vector(ids, {n}), Tensor::from_vector(labels, {n}),
                     Tensor::from_vector(positions, {n})};
}

std::vector<int64_t> values(const Tensor& t) {
  const int64_t* p = t.data<int64_t>();
  return {p, p + t.numel()};
}

TEST(CollatorPrePacked, PositionResetsSplitTheRow) {
  // Two sequences (3 and 2 tokens) then 2 padding tokens that restart too (labels -100).
  const TokenSample row =
      row_sample({10, 11, 12, 20, 21, 0, 0}, {-100, 11, 12, 20, 21, -100, -100}, {0, 1, 2, 0, 1, 0, 1});
  CollateOptions o;
  o.max_seq_len = 16;
  const PackedRow packed = pack_samples({row}, o);
  EXPECT_EQ(packed.cu_seqlens, (std::vector<int32_t>{0, 3, 5, 7}));
  // target[i] = label[i+1], except across a boundary: label 20 (first of the second sequence) is not a target.
  EXPECT_EQ(values(packed.target_ids), (std::vector<int64_t>{11, 12, -100, 21, -100, -100, -100}));
  EXPECT_EQ(packed.valid_tokens, 3);
  EXPECT_EQ(values(packed.position_ids), (std::vector<int64_t>{0, 1, 2, 0, 1, 0, 1}));
}

TEST(CollatorPrePacked, PackedWithOtherSamplesAndPaddedForSp) {
  const TokenSample row = row_sample({1, 2, 3, 4}, {1, 2, 3, 4}, {0, 1, 0, 1});
  const TokenSample plain = row_sample({5, 6, 7}, {5, 6, 7}, {0, 1, 2});
  CollateOptions o;
  o.max_seq_len = 16;
  o.sp_size = 4;
  const PackedRow packed = pack_samples({row, plain}, o);
  EXPECT_EQ(packed.cu_seqlens, (std::vector<int32_t>{0, 2, 4, 7, 8}));
  EXPECT_EQ(values(packed.target_ids), (std::vector<int64_t>{2, -100, 4, -100, 6, 7, -100, -100}));
}

TEST(CollatorPrePacked, SamplesWithoutResetsAreUnchanged) {
  CollateOptions o;
  o.max_seq_len = 16;
  const PackedRow packed = pack_samples({row_sample({1, 2, 3}, {1, 2, 3}, {0, 1, 2})}, o);
  EXPECT_EQ(packed.cu_seqlens, (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(values(packed.target_ids), (std::vector<int64_t>{2, 3, -100}));
}

}  // namespace
}  // namespace veomni
