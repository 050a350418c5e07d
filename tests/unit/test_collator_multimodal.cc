// The multimodal collator: packing with masks, positions and media in sample order, the SP slice, bad samples.
#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"
#include "data/multimodal_collator.h"

namespace veomni {
namespace {

Tensor iota_ids_tensor(int64_t length, int64_t first) {
  std::vector<int64_t> v(static_cast<size_t>(length));
  std::iota(v.begin(), v.end(), first);
  return Tensor::from_vector(v, {length});
}

Tensor mask_tensor(int64_t length, const std::vector<int64_t>& on) {
  Tensor t = Tensor::zeros({length}, DType::Bool);
  for (int64_t i : on) t.data<bool>()[i] = true;
  return t;
}

// Rows filled with `value` + row index, so concatenation order is visible.
Tensor rows_tensor(int64_t rows, int64_t width, float value) {
  Tensor t = Tensor::empty({rows, width}, DType::F32);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) t.data<float>()[r * width + c] = value + static_cast<float>(r);
  return t;
}

// Positions [3, L] f32: stream s holds 100*s + i.
Tensor positions_tensor(int64_t length) {
  Tensor t = Tensor::empty({3, length}, DType::F32);
  for (int64_t s = 0; s < 3; ++s)
    for (int64_t i = 0; i < length; ++i) t.data<float>()[s * length + i] = static_cast<float>(100 * s + i);
  return t;
}

// 10 tokens: an image of grid [1, 2, 4] (8 patches, 2 merged tokens at 2-3) and one 3-frame audio clip (1 token at 5).
Sample image_audio_sample() {
  Sample s;
  s["input_ids"] = iota_ids_tensor(10, 100);
  s["labels"] = iota_ids_tensor(10, 100);
  s["position_ids"] = positions_tensor(10);
  s["image_mask"] = mask_tensor(10, {2, 3});
  s["pixel_values"] = rows_tensor(8, 6, 0.0f);
  s["image_grid_thw"] = Tensor::from_vector<int64_t>({1, 2, 4}, {1, 3});
  s["audio_mask"] = mask_tensor(10, {5});
  s["input_features"] = rows_tensor(3, 4, 50.0f);
  s["audio_feature_lengths"] = Tensor::from_vector<int64_t>({3}, {1});
  return s;
}

// 6 tokens: a video of grid [2, 2, 2] (8 patches, 2 merged tokens at 1-2).
Sample video_sample() {
  Sample s;
  s["input_ids"] = iota_ids_tensor(6, 200);
  s["labels"] = iota_ids_tensor(6, 200);
  s["position_ids"] = positions_tensor(6);
  s["video_mask"] = mask_tensor(6, {1, 2});
  s["pixel_values_videos"] = rows_tensor(8, 6, 10.0f);
  s["video_grid_thw"] = Tensor::from_vector<int64_t>({2, 2, 2}, {1, 3});
  return s;
}

MultimodalCollateOptions omni_options() {
  MultimodalCollateOptions o;
  o.max_seq_len = 32;
  o.has_audio = true;
  o.position_dtype = DType::F32;
  return o;
}

std::vector<int64_t> i64_values(const Tensor& t) {
  const int64_t* p = t.data<int64_t>();
  return {p, p + t.numel()};
}

std::vector<int64_t> true_positions(const Tensor& mask) {
  std::vector<int64_t> on;
  if (!mask.defined()) return on;
  for (int64_t i = 0; i < mask.numel(); ++i)
    if (mask.data<bool>()[i]) on.push_back(i);
  return on;
}

TEST(CollatorMultimodal, PacksTextMasksPositionsAndMediaInSampleOrder) {
  const Sample a = image_audio_sample(), b = video_sample();
  const MultimodalBatch batch = collate_multimodal({{&a, "a"}, {&b, "b"}}, omni_options());
  ASSERT_EQ(batch.text.input_ids.numel(), 16);
  EXPECT_EQ(batch.text.cu_seqlens, (std::vector<int32_t>{0, 10, 16}));
  // target[i] = label[i+1]; nothing is predicted across the boundary (label 200) or after the last token.
  const std::vector<int64_t> targets = i64_values(batch.text.target_ids);
  EXPECT_EQ(targets[0], 101);
  EXPECT_EQ(targets[8], 109);
  EXPECT_EQ(targets[9], kIgnoreIndex);
  EXPECT_EQ(targets[10], 201);
  EXPECT_EQ(targets[15], kIgnoreIndex);
  EXPECT_EQ(batch.text.valid_tokens, 14);
  ASSERT_EQ(batch.text.position_ids.shape(), (Shape{3, 16}));
  ASSERT_EQ(batch.text.position_ids.dtype(), DType::F32);
  EXPECT_EQ(batch.text.position_ids.data<float>()[16 + 9], 109.0f);   // stream 1 of sample a's last token
  EXPECT_EQ(batch.text.position_ids.data<float>()[32 + 10], 200.0f);  // stream 2 of sample b's first token
  EXPECT_EQ(true_positions(batch.image_mask), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(true_positions(batch.video_mask), (std::vector<int64_t>{11, 12}));
  EXPECT_EQ(true_positions(batch.audio_mask), (std::vector<int64_t>{5}));
  EXPECT_EQ(batch.pixel_values.shape(), (Shape{8, 6}));
  EXPECT_EQ(batch.pixel_values_videos.shape(), (Shape{8, 6}));
  EXPECT_EQ(batch.pixel_values_videos.data<float>()[6 * 7], 17.0f);
  ASSERT_EQ(batch.image_grids.size(), 1u);
  EXPECT_EQ(batch.image_grids[0].w, 4);
  ASSERT_EQ(batch.video_grids.size(), 1u);
  EXPECT_EQ(batch.video_grids[0].t, 2);
  EXPECT_EQ(batch.audio_feature_lengths, (std::vector<int64_t>{3}));
  EXPECT_EQ(batch.input_features.data<float>()[4 * 2], 52.0f);
  EXPECT_TRUE(batch.whole_row());
}

TEST(CollatorMultimodal, MediaOfTwoSamplesOfOneKindConcatenate) {
  Sample a = video_sample(), b = video_sample();
  b["pixel_values_videos"] = rows_tensor(8, 6, 30.0f);
  MultimodalCollateOptions o = omni_options();
  const MultimodalBatch batch = collate_multimodal({{&a, "a"}, {&b, "b"}}, o);
  ASSERT_EQ(batch.pixel_values_videos.shape(), (Shape{16, 6}));
  EXPECT_EQ(batch.pixel_values_videos.data<float>()[6 * 8], 30.0f);
  EXPECT_EQ(batch.video_grids.size(), 2u);
  EXPECT_EQ(true_positions(batch.video_mask), (std::vector<int64_t>{1, 2, 7, 8}));
  EXPECT_FALSE(batch.image_mask.defined());
  EXPECT_FALSE(batch.input_features.defined());
}

TEST(CollatorMultimodal, SpSlicesPadAndCountEarlierMediaRows) {
  const Sample a = image_audio_sample(), b = video_sample();
  MultimodalCollateOptions o = omni_options();
  o.sp_size = 3;  // 16 tokens -> 18, slices of 6
  std::vector<MultimodalBatch> slices;
  for (int64_t r = 0; r < 3; ++r) {
    o.sp_rank = r;
    slices.push_back(collate_multimodal({{&a, "a"}, {&b, "b"}}, o));
  }
  EXPECT_EQ(slices[0].text.cu_seqlens, (std::vector<int32_t>{0, 10, 16, 18}));
  EXPECT_EQ(slices[1].text.sp_offset, 6);
  EXPECT_FALSE(slices[1].whole_row());
  // Rank 0 holds the image tokens and the audio token; rank 1 none of them; rank 2 the second video token only.
  EXPECT_EQ(true_positions(slices[0].image_mask), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(true_positions(slices[0].audio_mask), (std::vector<int64_t>{5}));
  EXPECT_FALSE(slices[1].image_mask.defined());
  EXPECT_FALSE(slices[1].audio_mask.defined());
  EXPECT_EQ(true_positions(slices[1].video_mask), (std::vector<int64_t>{5}));  // row 11
  EXPECT_EQ(slices[1].video_row_begin, 0);
  EXPECT_EQ(true_positions(slices[2].video_mask), (std::vector<int64_t>{0}));  // row 12
  EXPECT_EQ(slices[2].video_row_begin, 1);
  EXPECT_EQ(slices[2].audio_row_begin, 1);
  ASSERT_EQ(slices[2].text.position_ids.shape(), (Shape{3, 6}));
  EXPECT_EQ(slices[2].text.position_ids.data<float>()[6 + 0], 102.0f);  // stream 1 of row 12
  EXPECT_EQ(slices[2].text.position_ids.data<float>()[4], 0.0f);        // padding
  // Every slice carries the whole micro-batch's media.
  for (const MultimodalBatch& s : slices) {
    EXPECT_EQ(s.pixel_values.dim(0), 8);
    EXPECT_EQ(s.pixel_values_videos.dim(0), 8);
    EXPECT_EQ(s.audio_feature_lengths.size(), 1u);
  }
}

TEST(CollatorMultimodal, IntegerPositionsForQwen3Vl) {
  Sample b = video_sample();
  b["position_ids"] = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 5, 0, 1, 1, 2, 3, 4, 0, 1, 1, 2, 3, 4}, {3, 6});
  MultimodalCollateOptions o;
  o.max_seq_len = 32;
  const MultimodalBatch batch = collate_multimodal({{&b, "b"}}, o);
  ASSERT_EQ(batch.text.position_ids.dtype(), DType::I64);
  EXPECT_EQ(i64_values(batch.text.position_ids),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 0, 1, 1, 2, 3, 4, 0, 1, 1, 2, 3, 4}));
  Sample f = video_sample();
  f["position_ids"].data<float>()[3] = 2.5f;
  EXPECT_THROW(collate_multimodal({{&f, "f"}}, o), InputError);
}

void expect_collate_input_error(const Sample& sample, const MultimodalCollateOptions& o, const std::string& fragment) {
  try {
    collate_multimodal({{&sample, "data.h5 sample 7"}}, o);
    FAIL() << "expected an InputError with '" << fragment << "'";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("data.h5 sample 7"), std::string::npos) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
  }
}

TEST(CollatorMultimodal, InconsistentSamplesAreInputErrorsNamingTheSample) {
  Sample s = image_audio_sample();
  s["image_mask"] = mask_tensor(10, {2, 3, 4});
  expect_collate_input_error(s, omni_options(),
                             "image_mask marks 3 tokens but the image_grid_thw merged patches give 2");
  s = image_audio_sample();
  s["pixel_values"] = rows_tensor(7, 6, 0.0f);
  expect_collate_input_error(s, omni_options(), "pixel_values has 7 rows but image_grid_thw gives 8 patches");
  s = image_audio_sample();
  s["audio_feature_lengths"] = Tensor::from_vector<int64_t>({2}, {1});
  expect_collate_input_error(s, omni_options(), "input_features has 3 rows but audio_feature_lengths add up to 2");
  s = image_audio_sample();
  s["audio_mask"] = mask_tensor(10, {3});
  expect_collate_input_error(s, omni_options(), "token 3 is marked by more than one");
  s = video_sample();
  s["video_grid_thw"] = Tensor::from_vector<int64_t>({1, 1, 3}, {1, 3});
  s["pixel_values_videos"] = rows_tensor(3, 6, 0.0f);
  expect_collate_input_error(s, omni_options(), "merge windows");
  s = image_audio_sample();
  // A grid whose patch count would overflow 64 bits is refused before anything is counted or allocated.
  s["image_grid_thw"] = Tensor::from_vector<int64_t>({1, int64_t{1} << 40, int64_t{1} << 40}, {1, 3});
  expect_collate_input_error(s, omni_options(), "expected sizes in [1, 1048576]");
  s = image_audio_sample();
  MultimodalCollateOptions o = omni_options();
  o.max_seq_len = 8;
  expect_collate_input_error(s, o, "exceed data.max_seq_len 8");
  o = omni_options();
  o.has_audio = false;
  o.position_dtype = DType::I64;
  expect_collate_input_error(image_audio_sample(), o, "no audio encoder");
  s = image_audio_sample();
  s["position_ids"] = positions_tensor(9);
  expect_collate_input_error(s, omni_options(), "position_ids");
}

}  // namespace
}  // namespace veomni
