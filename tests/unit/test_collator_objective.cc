// The collator on preference pairs and rollout values: sequence roles, reference log-probs, shifted token values,
// the Ulysses slice, and the errors that name the sample and the key.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "data/collator.h"
#include "data/dataset_objective_keys.h"
#include "data/multimodal_collator.h"
#include "tests/common/expect_error.h"

namespace veomni {
namespace {

Tensor ids_tensor(const std::vector<int64_t>& v) { return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}); }
Tensor f32_tensor(const std::vector<float>& v) { return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}); }

std::vector<int64_t> ints(const Tensor& t) { return {t.data<int64_t>(), t.data<int64_t>() + t.numel()}; }
std::vector<float> floats(const Tensor& t) { return {t.data<float>(), t.data<float>() + t.numel()}; }

// Chosen [p1 p2 a1 a2], rejected [p1 p2 b1]: the prompt's labels off, positions restarting at the rejected.
TokenSample pair_sample(const std::string& context, bool with_ref = true) {
  TokenSample s;
  s.context = context;
  s.input_ids = ids_tensor({11, 12, 21, 22, 11, 12, 31});
  s.labels = ids_tensor({-100, -100, 21, 22, -100, -100, 31});
  s.position_ids = ids_tensor({0, 1, 2, 3, 0, 1, 2});
  s.chosen_length = 4;
  if (with_ref) {
    s.pair_values[kRefChosenLogpsKey] = f32_tensor({-1.5f});
    s.pair_values[kRefRejectedLogpsKey] = f32_tensor({-2.5f});
  }
  return s;
}

TokenSample plain_sample(const std::string& context) {
  TokenSample s;
  s.context = context;
  s.input_ids = ids_tensor({5, 6, 7});
  return s;
}

// A rollout of a 2-token prompt and a 3-token response; the values of token i are 10 * i + 1 (prompt included, to
// see that they are dropped).
TokenSample rollout_sample(const std::string& context) {
  TokenSample s;
  s.context = context;
  s.input_ids = ids_tensor({1, 2, 3, 4, 5});
  s.labels = ids_tensor({-100, -100, 3, 4, 5});
  s.token_values["advantages"] = f32_tensor({1, 11, 21, 31, 41});
  s.token_values["old_log_probs"] = f32_tensor({-1, -11, -21, -31, -41});
  return s;
}

using veomni::testing::expect_input_error;

CollateOptions collate_options(int64_t sp_size = 1) {
  CollateOptions o;
  o.max_seq_len = 16;
  o.sp_size = sp_size;
  return o;
}

TEST(CollatorPreference, PairIsTwoSequencesChosenThenRejected) {
  const PackedRow row = pack_samples({pair_sample("p.h5 sample 0"), plain_sample("p.h5 sample 1")}, collate_options());
  EXPECT_EQ(row.cu_seqlens, (std::vector<int32_t>{0, 4, 7, 10}));
  EXPECT_EQ(row.sequence_roles,
            (std::vector<SequenceRole>{SequenceRole::Chosen, SequenceRole::Rejected, SequenceRole::Plain}));
  // Nothing is predicted across the pair's boundary nor the prompts: the chosen answer 21 22, the rejected 31.
  EXPECT_EQ(ints(row.target_ids), (std::vector<int64_t>{-100, 21, 22, -100, -100, 31, -100, 6, 7, -100}));
  EXPECT_EQ(ints(row.position_ids), (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(row.sequence_values.at("ref_logps"), (std::vector<float>{-1.5f, -2.5f, 0.0f}));
  EXPECT_TRUE(row.token_values.empty());
}

TEST(CollatorPreference, WithoutReferenceLogpsThereAreNoSequenceValues) {
  const PackedRow row = pack_samples({pair_sample("a", false), pair_sample("b", false)}, collate_options());
  EXPECT_EQ(row.cu_seqlens, (std::vector<int32_t>{0, 4, 7, 11, 14}));
  EXPECT_TRUE(row.sequence_values.empty());
}

TEST(CollatorPreference, SftBatchesCarryPlainRolesOnly) {
  TokenSample a = plain_sample("a");
  const PackedRow row = pack_samples({a, plain_sample("b")}, collate_options(4));
  EXPECT_EQ(row.cu_seqlens, (std::vector<int32_t>{0, 3, 6, 8}));
  EXPECT_EQ(row.sequence_roles, std::vector<SequenceRole>(3, SequenceRole::Plain));
  EXPECT_TRUE(row.token_values.empty());
  EXPECT_TRUE(row.sequence_values.empty());
  EXPECT_EQ(ints(row.target_ids), (std::vector<int64_t>{6, 7, -100, 6, 7, -100, -100, -100}));
}

TEST(CollatorPreference, SpSliceOnTwoRanksKeepsTheGlobalSequences) {
  const PackedRow row = pack_samples({pair_sample("a"), pair_sample("b")}, collate_options(2));
  ASSERT_EQ(row.input_ids.dim(0), 14);
  for (int64_t rank = 0; rank < 2; ++rank) {
    const Batch b = slice_for_sp_rank(row, 2, rank);
    EXPECT_EQ(b.cu_seqlens, row.cu_seqlens);
    EXPECT_EQ(b.sequence_roles, (std::vector<SequenceRole>{SequenceRole::Chosen, SequenceRole::Rejected,
                                                           SequenceRole::Chosen, SequenceRole::Rejected}));
    EXPECT_EQ(b.sequence_values.at("ref_logps"), (std::vector<float>{-1.5f, -2.5f, -1.5f, -2.5f}));
    EXPECT_EQ(b.sp_offset, 7 * rank);
  }
}

TEST(CollatorPreference, ErrorsNameTheSample) {
  TokenSample long_pair = pair_sample("p.h5 sample 3");
  CollateOptions short_rows = collate_options();
  short_rows.max_seq_len = 6;
  expect_input_error([&] { pack_samples({long_pair}, short_rows); },
                     {"p.h5 sample 3: the preference pair has 7 tokens, more than data.max_seq_len 6"});
  TokenSample bad_length = pair_sample("p.h5 sample 4");
  bad_length.chosen_length = 7;
  expect_input_error([&] { pack_samples({bad_length}, collate_options()); },
                     {"p.h5 sample 4: chosen_length 7 is outside [1, 7)"});
  TokenSample no_restart = pair_sample("p.h5 sample 5");
  no_restart.position_ids = ids_tensor({0, 1, 2, 3, 4, 5, 6});
  expect_input_error([&] { pack_samples({no_restart}, collate_options()); },
                     {"p.h5 sample 5: position_ids do not restart at 0 where the rejected sequence begins"});
  TokenSample no_ref = pair_sample("p.h5 sample 6", false);
  expect_input_error([&] { pack_samples({pair_sample("p.h5 sample 1"), no_ref}, collate_options()); },
                     {"p.h5 sample 6: no key 'ref_chosen_logps'"});
  TokenSample nan_ref = pair_sample("p.h5 sample 7");
  nan_ref.pair_values[kRefRejectedLogpsKey] = f32_tensor({std::numeric_limits<float>::quiet_NaN()});
  expect_input_error([&] { pack_samples({nan_ref}, collate_options()); },
                     {"p.h5 sample 7: key 'ref_rejected_logps'[0] = nan is not finite"});
}

TEST(CollatorRollout, ValuesShiftWithTheLabels) {
  const PackedRow row =
      pack_samples({rollout_sample("r.h5 sample 0"), rollout_sample("r.h5 sample 1")}, collate_options());
  // Targets: 3 4 5 at positions 1 2 3 of each sample; value of token i+1 at target i, 0 where nothing is predicted.
  EXPECT_EQ(ints(row.target_ids), (std::vector<int64_t>{-100, 3, 4, 5, -100, -100, 3, 4, 5, -100}));
  EXPECT_EQ(floats(row.token_values.at("advantages")), (std::vector<float>{0, 21, 31, 41, 0, 0, 21, 31, 41, 0}));
  EXPECT_EQ(floats(row.token_values.at("old_log_probs")),
            (std::vector<float>{0, -21, -31, -41, 0, 0, -21, -31, -41, 0}));
  EXPECT_EQ(row.sequence_roles, std::vector<SequenceRole>(2, SequenceRole::Plain));
}

TEST(CollatorRollout, SpSliceOnTwoRanksSlicesValuesLikeTargets) {
  const PackedRow row =
      pack_samples({rollout_sample("a"), rollout_sample("b"), rollout_sample("c")}, collate_options(2));
  ASSERT_EQ(row.input_ids.dim(0), 16);  // 15 tokens padded to a multiple of 2
  std::vector<float> joined;
  std::vector<int64_t> targets;
  for (int64_t rank = 0; rank < 2; ++rank) {
    const Batch b = slice_for_sp_rank(row, 2, rank);
    const Tensor& advantages = b.token_values.at("advantages");
    ASSERT_EQ(advantages.dim(0), 8);
    for (int64_t i = 0; i < 8; ++i) {
      if (b.target_ids.data<int64_t>()[i] == kIgnoreIndex) {
        EXPECT_EQ(advantages.data<float>()[i], 0.0f);
      }
    }
    const std::vector<float> part = floats(advantages);
    joined.insert(joined.end(), part.begin(), part.end());
  }
  EXPECT_EQ(joined, floats(row.token_values.at("advantages")));
  EXPECT_EQ(joined.back(), 0.0f);  // padding
  EXPECT_EQ(joined[11], 21.0f);    // the third sample's first target, in rank 1's slice
}

TEST(CollatorRollout, TruncationCutsValuesWithTheTokens) {
  CollateOptions o = collate_options();
  o.max_seq_len = 4;
  const PackedRow row = pack_samples({rollout_sample("a")}, o);
  EXPECT_EQ(floats(row.token_values.at("advantages")), (std::vector<float>{0, 21, 31, 0}));
}

TEST(CollatorRollout, ErrorsNameTheSampleAndKey) {
  TokenSample short_values = rollout_sample("r.h5 sample 2");
  short_values.token_values["advantages"] = f32_tensor({1, 2, 3});
  expect_input_error([&] { pack_samples({short_values}, collate_options()); },
                     {"r.h5 sample 2: key 'advantages' is f32[3]", "expected f32[5] like input_ids"});
  TokenSample missing = rollout_sample("r.h5 sample 3");
  missing.token_values.erase("old_log_probs");
  expect_input_error([&] { pack_samples({rollout_sample("r.h5 sample 0"), missing}, collate_options()); },
                     {"r.h5 sample 3: no key 'old_log_probs'"});
  TokenSample infinite = rollout_sample("r.h5 sample 4");
  infinite.token_values["advantages"].data<float>()[3] = std::numeric_limits<float>::infinity();
  expect_input_error([&] { pack_samples({infinite}, collate_options()); },
                     {"r.h5 sample 4: key 'advantages'[3] = inf is not finite"});
}

TEST(CollatorObjectiveKeys, TokenSampleFromAStoredSample) {
  Sample stored;
  stored["input_ids"] = ids_tensor({11, 12, 21, 22, 11, 12, 31});
  stored["labels"] = ids_tensor({-100, -100, 21, 22, -100, -100, 31});
  stored["position_ids"] = ids_tensor({0, 1, 2, 3, 0, 1, 2});
  stored[kChosenLengthKey] = ids_tensor({4});
  stored[kRefChosenLogpsKey] = f32_tensor({-1.5f});
  stored[kRefRejectedLogpsKey] = f32_tensor({-2.5f});
  stored["returns"] = f32_tensor({0, 0, 1, 1, 0, 0, 1});
  const TokenSample t = token_sample_from(stored, "p.h5 sample 0");
  EXPECT_EQ(t.chosen_length, 4);
  EXPECT_EQ(t.pair_values.size(), 2u);
  EXPECT_EQ(t.token_values.count("returns"), 1u);
  stored[kChosenLengthKey] = f32_tensor({4});
  expect_input_error([&] { token_sample_from(stored, "p.h5 sample 9"); },
                     {"p.h5 sample 9: key 'chosen_length' is f32[1]", "expected i64[1]"});
}

TEST(CollatorObjectiveKeys, MultimodalBatchCarriesRolesAndValues) {
  Sample pair;
  pair["input_ids"] = ids_tensor({11, 12, 21, 22, 11, 12, 31});
  pair["labels"] = ids_tensor({-100, -100, 21, 22, -100, -100, 31});
  pair["position_ids"] = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 0, 1, 2, 3, 0, 1, 2,
                                                                  0, 1, 2, 3, 0, 1, 2},
                                             {3, 7});
  pair[kChosenLengthKey] = ids_tensor({4});
  pair["advantages"] = f32_tensor({0, 0, 1, 2, 0, 0, 3});
  MultimodalCollateOptions o;
  o.max_seq_len = 16;
  o.sp_size = 2;
  o.sp_rank = 1;
  const MultimodalBatch batch = collate_multimodal({{&pair, "p.h5 sample 0"}}, o);
  EXPECT_EQ(batch.text.cu_seqlens, (std::vector<int32_t>{0, 4, 7, 8}));
  EXPECT_EQ(batch.text.sequence_roles,
            (std::vector<SequenceRole>{SequenceRole::Chosen, SequenceRole::Rejected, SequenceRole::Plain}));
  // Rank 1 holds tokens 4..7: the rejected sequence (targets -100, 31, -100) and the padding.
  EXPECT_EQ(floats(batch.text.token_values.at("advantages")), (std::vector<float>{0, 3, 0, 0}));
  Sample flat = pair;
  flat["position_ids"] = Tensor::from_vector(std::vector<int64_t>(21, 1), {3, 7});
  expect_input_error([&] { collate_multimodal({{&flat, "p.h5 sample 2"}}, o); },
                     {"p.h5 sample 2: position_ids do not restart at 0 where the rejected sequence begins"});
}

}  // namespace
}  // namespace veomni
