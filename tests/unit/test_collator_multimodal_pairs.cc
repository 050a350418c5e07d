// The multimodal collator on preference pairs with media in the prompt: roles, both halves' copies of the media,
// positions restarting at the rejected sequence, the Ulysses slices, media that straddle the halves, and the dummy
// pairs of veomni-dummy-data packing as the trainer packs them.
#include <gtest/gtest.h>

#include <numeric>

#include "data/dataset_objective_keys.h"
#include "data/dummy_data.h"
#include "data/multimodal_collator.h"
#include "tests/common/expect_error.h"

namespace veomni {
namespace {

using veomni::testing::expect_input_error;

Tensor i64_tensor(const std::vector<int64_t>& v) { return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}); }

Tensor pair_mask_tensor(int64_t length, const std::vector<int64_t>& on) {
  Tensor t = Tensor::zeros({length}, DType::Bool);
  for (int64_t i : on) t.data<bool>()[i] = true;
  return t;
}

// Rows filled with `value` + row index, so the order of the media rows is visible.
Tensor pair_rows_tensor(int64_t rows, int64_t width, float value) {
  Tensor t = Tensor::empty({rows, width}, DType::F32);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) t.data<float>()[r * width + c] = value + static_cast<float>(r);
  return t;
}

std::vector<int64_t> pair_ints(const Tensor& t) { return {t.data<int64_t>(), t.data<int64_t>() + t.numel()}; }

std::vector<int64_t> pair_true_positions(const Tensor& mask) {
  std::vector<int64_t> on;
  if (!mask.defined()) return on;
  for (int64_t i = 0; i < mask.numel(); ++i)
    if (mask.data<bool>()[i]) on.push_back(i);
  return on;
}

// Each half holds the prompt [10, img, img, 11, aud, 12] (an image of grid [1, 2, 4]: 2 merged tokens; a 3-frame
// clip: 1 audio token), then its answer: [21, 22] for the chosen half (8 tokens), [31] for the rejected one (7).
// The media rows count up through both copies (the chosen half's rows 0-7, the rejected half's 8-15). Positions f32
// [3, 15]: stream s holds (s + 1) * i within each half.
constexpr int64_t kChosen = 8, kPairLength = 15;

Sample omni_pair() {
  Sample s;
  s["input_ids"] = i64_tensor({10, 0, 0, 11, 0, 12, 21, 22, 10, 0, 0, 11, 0, 12, 31});
  s["labels"] = i64_tensor({-100, -100, -100, -100, -100, -100, 21, 22, -100, -100, -100, -100, -100, -100, 31});
  Tensor positions = Tensor::empty({3, kPairLength}, DType::F32);
  for (int64_t st = 0; st < 3; ++st)
    for (int64_t i = 0; i < kPairLength; ++i)
      positions.data<float>()[st * kPairLength + i] = static_cast<float>((st + 1) * (i < kChosen ? i : i - kChosen));
  s["position_ids"] = positions;
  s[kChosenLengthKey] = i64_tensor({kChosen});
  s["image_mask"] = pair_mask_tensor(kPairLength, {1, 2, 9, 10});
  s["pixel_values"] = pair_rows_tensor(16, 6, 0.0f);
  s["image_grid_thw"] = Tensor::from_vector<int64_t>({1, 2, 4, 1, 2, 4}, {2, 3});
  s["audio_mask"] = pair_mask_tensor(kPairLength, {4, 12});
  s["input_features"] = pair_rows_tensor(6, 4, 50.0f);
  s["audio_feature_lengths"] = i64_tensor({3, 3});
  return s;
}

MultimodalCollateOptions pair_omni_options() {
  MultimodalCollateOptions o;
  o.max_seq_len = 64;
  o.has_audio = true;
  o.position_dtype = DType::F32;
  return o;
}

TEST(CollatorMultimodalPairs, PairIsChosenThenRejectedWithBothCopiesOfTheMedia) {
  const Sample pair = omni_pair();
  const MultimodalBatch batch = collate_multimodal({{&pair, "p.h5 sample 0"}}, pair_omni_options());
  EXPECT_EQ(batch.text.cu_seqlens, (std::vector<int32_t>{0, 8, 15}));
  EXPECT_EQ(batch.text.sequence_roles, (std::vector<SequenceRole>{SequenceRole::Chosen, SequenceRole::Rejected}));
  // Nothing is predicted across the halves: target 7 (the chosen's last token) would be the rejected's first label.
  const std::vector<int64_t> targets = pair_ints(batch.text.target_ids);
  EXPECT_EQ(targets[5], 21);
  EXPECT_EQ(targets[6], 22);
  EXPECT_EQ(targets[7], kIgnoreIndex);
  EXPECT_EQ(targets[13], 31);
  EXPECT_EQ(batch.text.valid_tokens, 3);
  EXPECT_EQ(pair_true_positions(batch.image_mask), (std::vector<int64_t>{1, 2, 9, 10}));
  EXPECT_EQ(pair_true_positions(batch.audio_mask), (std::vector<int64_t>{4, 12}));
  ASSERT_EQ(batch.image_grids.size(), 2u);
  ASSERT_EQ(batch.pixel_values.shape(), (Shape{16, 6}));
  EXPECT_EQ(batch.pixel_values.data<float>()[6 * 8], 8.0f);  // the rejected half's copy follows the chosen half's
  EXPECT_EQ(batch.audio_feature_lengths, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(batch.input_features.shape(), (Shape{6, 4}));
  ASSERT_EQ(batch.text.position_ids.shape(), (Shape{3, 15}));
  for (int64_t st = 0; st < 3; ++st) {
    EXPECT_EQ(batch.text.position_ids.data<float>()[st * 15 + 7], static_cast<float>((st + 1) * 7));
    EXPECT_EQ(batch.text.position_ids.data<float>()[st * 15 + 8], 0.0f) << "stream " << st;
  }
}

TEST(CollatorMultimodalPairs, TwoPairsOfAMicroBatchKeepTheirMediaInOrder) {
  const Sample a = omni_pair();
  Sample b = omni_pair();
  b["pixel_values"] = pair_rows_tensor(16, 6, 100.0f);
  const MultimodalBatch batch = collate_multimodal({{&a, "a"}, {&b, "b"}}, pair_omni_options());
  EXPECT_EQ(batch.text.cu_seqlens, (std::vector<int32_t>{0, 8, 15, 23, 30}));
  EXPECT_EQ(batch.text.sequence_roles, (std::vector<SequenceRole>{SequenceRole::Chosen, SequenceRole::Rejected,
                                                                  SequenceRole::Chosen, SequenceRole::Rejected}));
  EXPECT_EQ(pair_true_positions(batch.image_mask), (std::vector<int64_t>{1, 2, 9, 10, 16, 17, 24, 25}));
  EXPECT_EQ(batch.image_grids.size(), 4u);
  ASSERT_EQ(batch.pixel_values.dim(0), 32);
  EXPECT_EQ(batch.pixel_values.data<float>()[6 * 16], 100.0f);
  EXPECT_EQ(batch.audio_feature_lengths.size(), 4u);
}

TEST(CollatorMultimodalPairs, SpSlicesKeepTheGlobalSequencesAndCountEarlierMedia) {
  const Sample pair = omni_pair();
  MultimodalCollateOptions o = pair_omni_options();
  o.sp_size = 2;  // 15 tokens -> 16: rank 0 holds the chosen half, rank 1 the rejected half and the padding
  o.sp_rank = 0;
  const MultimodalBatch first = collate_multimodal({{&pair, "p"}}, o);
  o.sp_rank = 1;
  const MultimodalBatch second = collate_multimodal({{&pair, "p"}}, o);
  for (const MultimodalBatch* b : {&first, &second}) {
    EXPECT_EQ(b->text.cu_seqlens, (std::vector<int32_t>{0, 8, 15, 16}));
    EXPECT_EQ(b->text.sequence_roles, (std::vector<SequenceRole>{SequenceRole::Chosen, SequenceRole::Rejected,
                                                                 SequenceRole::Plain}));
    EXPECT_EQ(b->pixel_values.dim(0), 16);  // every rank carries both copies of the media
    EXPECT_EQ(b->audio_feature_lengths.size(), 2u);
  }
  EXPECT_EQ(pair_true_positions(first.image_mask), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(first.image_row_begin, 0);
  EXPECT_EQ(pair_true_positions(second.image_mask), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(second.image_row_begin, 2);  // the chosen half's image tokens come first
  EXPECT_EQ(pair_true_positions(second.audio_mask), (std::vector<int64_t>{4}));
  EXPECT_EQ(second.audio_row_begin, 1);
  EXPECT_EQ(second.text.sp_offset, 8);
  ASSERT_EQ(second.text.position_ids.shape(), (Shape{3, 8}));
  EXPECT_EQ(second.text.position_ids.data<float>()[8 + 0], 0.0f);  // stream 1 restarts at the rejected half
  EXPECT_EQ(second.text.position_ids.data<float>()[8 + 1], 2.0f);
  EXPECT_EQ(pair_ints(second.text.target_ids)[5], 31);
}

TEST(CollatorMultimodalPairs, MediaStraddlingTheHalvesAreInputErrors) {
  Sample pair = omni_pair();
  pair["image_mask"] = pair_mask_tensor(kPairLength, {2, 8, 9, 10});  // the first image's second token in the rejected
  expect_input_error([&] { collate_multimodal({{&pair, "p.h5 sample 4"}}, pair_omni_options()); },
                     {"p.h5 sample 4: image_grid_thw item 0 of the preference pair straddles its two sequences",
                      "image_mask marks 1 tokens before chosen_length 8"});
  pair = omni_pair();
  pair["position_ids"].data<float>()[kPairLength + kChosen] = 1.0f;  // stream 1 does not restart
  expect_input_error([&] { collate_multimodal({{&pair, "p.h5 sample 5"}}, pair_omni_options()); },
                     {"p.h5 sample 5: position_ids do not restart at 0 where the rejected sequence begins"});
}

// veomni-dummy-data's multimodal pairs pack as the trainer packs them: two sequences, the media of both halves.
TEST(CollatorMultimodalPairs, DummyPairsOfBothFamiliesCollate) {
  for (const DummyType media : {DummyType::Qwen3VL, DummyType::Qwen3Omni}) {
    const DummyLayout layout = dummy_layout(DummyType::Preference, 320, media);
    const Sample pair = make_dummy_sample(layout, 3, 1);
    MultimodalCollateOptions o;
    o.max_seq_len = 320;
    o.has_audio = media == DummyType::Qwen3Omni;
    o.position_dtype = o.has_audio ? DType::F32 : DType::I64;
    o.sp_size = 2;
    o.sp_rank = 1;
    const MultimodalBatch batch = collate_multimodal({{&pair, "dummy"}}, o);
    EXPECT_EQ(batch.text.cu_seqlens, (std::vector<int32_t>{0, 160, 320}));
    EXPECT_EQ(batch.text.sequence_roles, (std::vector<SequenceRole>{SequenceRole::Chosen, SequenceRole::Rejected}));
    EXPECT_EQ(batch.image_grids.size(), 4u);
    EXPECT_EQ(batch.video_grids.size(), 2u);
    EXPECT_EQ(batch.audio_feature_lengths.size(), o.has_audio ? 4u : 0u);
    // Rank 1 holds the rejected half: its media tokens come after the chosen half's.
    EXPECT_EQ(batch.image_row_begin, layout.image_tokens / 2);
    EXPECT_EQ(pair_true_positions(batch.image_mask).size(), static_cast<size_t>(layout.image_tokens / 2));
    EXPECT_EQ(batch.video_row_begin, layout.video_tokens / 2);
  }
}

}  // namespace
}  // namespace veomni
