// Unit tests of the 3-D M-RoPE position ids: hand-computed Qwen3-VL / Qwen3-Omni cases, errors, HF fixtures.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/audio_length.h"
#include "data/mrope_positions.h"
#include "io/json_file.h"
#include "io/safetensors.h"

using namespace veomni;

namespace {

constexpr int64_t kVs = 151652, kVe = 151653, kImg = 151655, kVid = 151656;
constexpr int64_t kAs = 151669, kAe = 151670, kAud = 151675;
constexpr int64_t kTxt = 42;

std::vector<int64_t> repeat(int64_t id, int64_t n) { return std::vector<int64_t>(static_cast<size_t>(n), id); }

std::vector<int64_t> concat(std::initializer_list<std::vector<int64_t>> parts) {
  std::vector<int64_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Row-major (3, L) from its three rows.
template <typename T>
std::vector<T> rows3(const std::vector<T>& t, const std::vector<T>& h, const std::vector<T>& w) {
  std::vector<T> out(t);
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), w.begin(), w.end());
  return out;
}

// ---- Qwen3-VL ----

TEST(MropeQwen3Vl, TextOnlyIsArangeOnThreeRows) {
  const auto p = qwen3_vl_rope_index(repeat(kTxt, 5), {});
  EXPECT_EQ(p.position_ids, rows3<int64_t>({0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}));
  EXPECT_EQ(p.rope_delta, 0);
  EXPECT_EQ(p.length(), 5);
}

TEST(MropeQwen3Vl, OneImageInTheMiddle) {
  const auto ids = concat({{kTxt, kTxt, kVs}, repeat(kImg, 4), {kVe, kTxt}});
  const auto p = qwen3_vl_rope_index(ids, {{{1, 4, 4}}, {}});
  EXPECT_EQ(p.position_ids, rows3<int64_t>({0, 1, 2, 3, 3, 3, 3, 5, 6},  //
                                           {0, 1, 2, 3, 3, 4, 4, 5, 6},  //
                                           {0, 1, 2, 3, 4, 3, 4, 5, 6}));
  EXPECT_EQ(p.rope_delta, 6 + 1 - 9);
}

TEST(MropeQwen3Vl, TwoImagesAdvanceByTheLargerMergedSide) {
  const auto ids = concat({{kVs}, repeat(kImg, 4), {kVe, kVs}, repeat(kImg, 2), {kVe}});
  const auto p = qwen3_vl_rope_index(ids, {{{1, 4, 4}, {1, 2, 4}}, {}});
  EXPECT_EQ(p.position_ids, rows3<int64_t>({0, 1, 1, 1, 1, 3, 4, 5, 5, 7},  //
                                           {0, 1, 1, 2, 2, 3, 4, 5, 5, 7},  //
                                           {0, 1, 2, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(p.rope_delta, 7 + 1 - 10);
}

TEST(MropeQwen3Vl, VideoFramesSplitByTimestamps) {
  // Each frame: two timestamp-text tokens, <|vision_start|>, 4 video tokens, <|vision_end|>.
  const auto frame = concat({{kTxt, kTxt, kVs}, repeat(kVid, 4), {kVe}});
  const auto p = qwen3_vl_rope_index(concat({frame, frame}), {{}, {{2, 4, 4}}});
  EXPECT_EQ(p.position_ids, rows3<int64_t>({0, 1, 2, 3, 3, 3, 3, 5, 6, 7, 8, 9, 9, 9, 9, 11},
                                           {0, 1, 2, 3, 3, 4, 4, 5, 6, 7, 8, 9, 9, 10, 10, 11},
                                           {0, 1, 2, 3, 4, 3, 4, 5, 6, 7, 8, 9, 10, 9, 10, 11}));
  EXPECT_EQ(p.rope_delta, 11 + 1 - 16);
}

TEST(MropeQwen3Vl, MaskedTokensHoldZeroAndDeltaCountsAttendedOnly) {
  const auto ids = concat({{0, 0, kTxt, kVs}, repeat(kImg, 4), {kVe, 0}});
  const std::vector<int64_t> mask = {0, 0, 1, 1, 1, 1, 1, 1, 1, 0};
  const auto p = qwen3_vl_rope_index(ids, {{{1, 4, 4}}, {}}, {}, mask);
  EXPECT_EQ(p.position_ids, rows3<int64_t>({0, 0, 0, 1, 2, 2, 2, 2, 4, 0},  //
                                           {0, 0, 0, 1, 2, 2, 3, 3, 4, 0},  //
                                           {0, 0, 0, 1, 2, 3, 2, 3, 4, 0}));
  EXPECT_EQ(p.rope_delta, 4 + 1 - 7);
}

TEST(MropeQwen3Vl, VeOmniPlaceholdersGiveTheSamePositions) {
  const auto real = concat({{kTxt, kVs}, repeat(kImg, 4), {kVe, kTxt, kVs}, repeat(kVid, 6), {kVe}});
  const auto placeholders =
      concat({{kTxt, kVs}, repeat(kImageInputIndex, 4), {kVe, kTxt, kVs}, repeat(kVideoInputIndex, 6), {kVe}});
  const Qwen3VlMedia media{{{1, 4, 4}}, {{1, 4, 6}}};
  const auto a = qwen3_vl_rope_index(real, media);
  const auto b = qwen3_vl_rope_index(placeholders, media, with_veomni_placeholders(Qwen3VlRopeOptions{}));
  EXPECT_EQ(a.position_ids, b.position_ids);
  EXPECT_EQ(a.rope_delta, b.rope_delta);
  // With the real ids the placeholders are text.
  EXPECT_EQ(qwen3_vl_rope_index(placeholders, {}).rope_delta, 0);
}

TEST(MropeQwen3Vl, MismatchedMediaIsInputError) {
  const auto two_images = concat({{kVs}, repeat(kImg, 4), {kVe, kVs}, repeat(kImg, 4), {kVe}});
  EXPECT_THROW(qwen3_vl_rope_index(two_images, {{{1, 4, 4}}, {}}), InputError);  // more image runs than grids
  EXPECT_THROW(qwen3_vl_rope_index(two_images, {}), InputError);
  const auto one_image = concat({{kVs}, repeat(kImg, 4), {kVe}});
  EXPECT_THROW(qwen3_vl_rope_index(one_image, {{{1, 4, 4}, {1, 4, 4}}, {}}), InputError);  // grid left over
  EXPECT_THROW(qwen3_vl_rope_index(one_image, {{{1, 4, 8}}, {}}), InputError);             // 4 tokens, grid 8
  EXPECT_THROW(qwen3_vl_rope_index(one_image, {{{1, 3, 4}}, {}}), InputError);             // not mergeable
  const auto one_frame = concat({{kVs}, repeat(kVid, 4), {kVe}});
  EXPECT_THROW(qwen3_vl_rope_index(one_frame, {{}, {{2, 4, 4}}}), InputError);  // second frame missing
  // Two images with nothing between them are one run, as transformers groups them.
  EXPECT_THROW(qwen3_vl_rope_index(repeat(kImg, 8), {{{1, 4, 4}, {1, 4, 4}}, {}}), InputError);
}

TEST(MropeQwen3Vl, BadMaskIsInputError) {
  EXPECT_THROW(qwen3_vl_rope_index({kTxt, kTxt}, {}, {}, {1}), InputError);
  EXPECT_THROW(qwen3_vl_rope_index({kTxt, kTxt}, {}, {}, {1, 2}), InputError);
  EXPECT_THROW(qwen3_vl_rope_index({kTxt, kTxt}, {}, {}, {0, 0}), InputError);
  EXPECT_THROW(qwen3_vl_rope_index({}, {}), InputError);
}

TEST(MropeQwen3Vl, ErrorNamesThePosition) {
  try {
    qwen3_vl_rope_index(concat({{kTxt, kVs}, repeat(kImg, 3), {kVe}}), {{{1, 4, 4}}, {}});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("input position 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("image 0"), std::string::npos) << e.what();
  }
}

// ---- Qwen3-Omni ----

TEST(MropeQwen3Omni, DefaultsAreTheCheckpointIds) {
  const Qwen3OmniRopeOptions o;
  EXPECT_EQ(o.audio_token_id, 151675);
  EXPECT_EQ(o.audio_start_token_id, 151669);
  EXPECT_EQ(o.vision_start_token_id, 151652);
  EXPECT_EQ(o.position_id_per_seconds, 13);
  const Qwen3OmniRopeOptions p = with_veomni_placeholders(o);
  EXPECT_EQ(p.image_token_id, -200);
  EXPECT_EQ(p.video_token_id, -300);
  EXPECT_EQ(p.audio_token_id, -400);
  EXPECT_EQ(p.audio_start_token_id, 151669);
}

TEST(MropeQwen3Omni, TextPathWithoutVisionGrids) {
  // Masked tokens get 1 on this path; audio alone does not leave it.
  const auto p = qwen3_omni_rope_index({0, 0, kTxt, kTxt, kTxt}, {}, {}, {0, 0, 1, 1, 1});
  EXPECT_EQ(p.position_ids, rows3<float>({1, 1, 0, 1, 2}, {1, 1, 0, 1, 2}, {1, 1, 0, 1, 2}));
  EXPECT_EQ(p.rope_delta, 0.0f);
  const auto audio = qwen3_omni_rope_index(concat({{kTxt, kAs}, repeat(kAud, 4), {kAe}}), {{}, {}, {}, {30}});
  EXPECT_EQ(audio.position_ids, rows3<float>({0, 1, 2, 3, 4, 5, 6}, {0, 1, 2, 3, 4, 5, 6}, {0, 1, 2, 3, 4, 5, 6}));
}

TEST(MropeQwen3Omni, OneImageMatchesQwen3Vl) {
  const auto ids = concat({{kTxt, kTxt, kVs}, repeat(kImg, 4), {kVe, kTxt}});
  const auto p = qwen3_omni_rope_index(ids, {{{1, 4, 4}}, {}, {}, {}});
  EXPECT_EQ(p.position_ids, rows3<float>({0, 1, 2, 3, 3, 3, 3, 5, 6},  //
                                         {0, 1, 2, 3, 3, 4, 4, 5, 6},  //
                                         {0, 1, 2, 3, 4, 3, 4, 5, 6}));
  EXPECT_EQ(p.rope_delta, -2.0f);
}

TEST(MropeQwen3Omni, ImageThenAudio) {
  ASSERT_EQ(audio_output_length(30), 4);
  const auto ids = concat({{kVs}, repeat(kImg, 4), {kVe, kAs}, repeat(kAud, 4), {kAe}});
  const auto p = qwen3_omni_rope_index(ids, {{{1, 4, 4}}, {}, {}, {30}});
  EXPECT_EQ(p.position_ids, rows3<float>({0, 1, 1, 1, 1, 3, 4, 5, 6, 7, 8, 9},  //
                                         {0, 1, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9},  //
                                         {0, 1, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(p.rope_delta, -2.0f);
}

TEST(MropeQwen3Omni, VideoTemporalPositionsFollowSeconds) {
  // fps 2: second_per_grid 2/2 = 1, 13 positions per second.
  const auto ids = concat({{kVs}, repeat(kVid, 8), {kVe}});
  const auto p = qwen3_omni_rope_index(ids, {{}, {{2, 4, 4}}, {1.0}, {}});
  EXPECT_EQ(p.position_ids, rows3<float>({0, 1, 1, 1, 1, 14, 14, 14, 14, 15},  //
                                         {0, 1, 1, 2, 2, 1, 1, 2, 2, 15},      //
                                         {0, 1, 2, 1, 2, 1, 2, 1, 2, 15}));
  EXPECT_EQ(p.rope_delta, 15.0f + 1 - 10);
}

TEST(MropeQwen3Omni, FractionalSecondsRoundInFloat32) {
  const auto ids = concat({{kVs}, repeat(kVid, 12), {kVe}});
  const auto p = qwen3_omni_rope_index(ids, {{}, {{3, 4, 4}}, {2.0 / 24}, {}});
  const float second_per_grid = static_cast<float>(2.0 / 24);
  for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(p.at(0, 1 + 4 * k), (static_cast<float>(k) * second_per_grid) * 13.0f + 1);
  EXPECT_NE(p.at(0, 1 + 4 * 1), static_cast<float>(1 * (2.0 / 24) * 13 + 1));  // not the double value rounded
}

TEST(MropeQwen3Omni, AudioInVideoMergesByTime) {
  // position_id_per_seconds 2: video frames at t = 2 and 4 (after the 2 start tokens), audio 2..5; video first on
  // ties; the audio tail is the last chunk.
  Qwen3OmniRopeOptions options;
  options.position_id_per_seconds = 2;
  options.use_audio_in_video = true;
  const auto ids = concat({{kVs, kAs}, repeat(kVid, 4), {kAud, kAud}, repeat(kVid, 4), {kAud, kAud, kAe, kVe}});
  const auto p = qwen3_omni_rope_index(ids, {{}, {{2, 4, 4}}, {1.0}, {30}}, options);
  EXPECT_EQ(p.position_ids, rows3<float>({0, 1, 2, 2, 2, 2, 2, 3, 4, 4, 4, 4, 4, 5, 6, 7},
                                         {0, 1, 2, 2, 3, 3, 2, 3, 2, 2, 3, 3, 4, 5, 6, 7},
                                         {0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(p.rope_delta, 7.0f + 1 - 16);
  // The same with VeOmni's placeholders.
  std::vector<int64_t> placeholders = ids;
  for (auto& id : placeholders) id = id == kVid ? kVideoInputIndex : id == kAud ? kAudioInputIndex : id;
  const auto q = qwen3_omni_rope_index(placeholders, {{}, {{2, 4, 4}}, {1.0}, {30}}, with_veomni_placeholders(options));
  EXPECT_EQ(q.position_ids, p.position_ids);
}

TEST(MropeQwen3Omni, EndAfterAudioInVideoStartsAfterTheLastChunk) {
  // A 4x4 merged frame at t = 2 reaches h, w = 5, but the 2-token audio tail (2, 3) is the last chunk: the end
  // tokens start at 4, as transformers computes it.
  ASSERT_EQ(audio_output_length(10), 2);
  Qwen3OmniRopeOptions options;
  options.use_audio_in_video = true;
  const auto ids = concat({{kVs, kAs}, repeat(kVid, 16), {kAud, kAud, kAe, kVe}});
  const auto p = qwen3_omni_rope_index(ids, {{}, {{1, 8, 8}}, {1.0}, {10}}, options);
  EXPECT_EQ(p.at(0, 18), 2.0f);
  EXPECT_EQ(p.at(0, 19), 3.0f);
  EXPECT_EQ(p.at(1, 17), 5.0f);
  EXPECT_EQ(p.at(0, 20), 4.0f);
  EXPECT_EQ(p.at(2, 21), 5.0f);
  EXPECT_EQ(p.rope_delta, 5.0f + 1 - 22);
}

TEST(MropeQwen3Omni, MismatchedMediaIsInputError) {
  const auto image = concat({{kVs}, repeat(kImg, 4), {kVe}});
  const auto audio = concat({{kAs}, repeat(kAud, 4), {kAe}});
  const auto video = concat({{kVs}, repeat(kVid, 4), {kVe}});
  EXPECT_THROW(qwen3_omni_rope_index(concat({image, image}), {{{1, 4, 4}}, {}, {}, {}}), InputError);
  EXPECT_THROW(qwen3_omni_rope_index(image, {{{1, 4, 4}, {1, 4, 4}}, {}, {}, {}}), InputError);
  EXPECT_THROW(qwen3_omni_rope_index(image, {{{1, 4, 8}}, {}, {}, {}}), InputError);
  EXPECT_THROW(qwen3_omni_rope_index(concat({image, audio}), {{{1, 4, 4}}, {}, {}, {}}), InputError);
  EXPECT_THROW(qwen3_omni_rope_index(concat({image, audio}), {{{1, 4, 4}}, {}, {}, {0}}), InputError);
  EXPECT_THROW(qwen3_omni_rope_index(concat({image, audio}), {{{1, 4, 4}}, {}, {}, {100}}), InputError);
  EXPECT_THROW(qwen3_omni_rope_index(video, {{}, {{1, 4, 4}}, {}, {}}), InputError);  // no second_per_grid
  EXPECT_THROW(qwen3_omni_rope_index({kTxt, kVs, kTxt, kVe}, {{{1, 4, 4}}, {}, {}, {}}), InputError);
  EXPECT_THROW(qwen3_omni_rope_index({kTxt, kVs}, {{{1, 4, 4}}, {}, {}, {}}), InputError);
  EXPECT_THROW(qwen3_omni_rope_index(image, {{{1, 4, 4}}, {}, {}, {}}, {}, {0, 0, 0, 0, 0, 0}), InputError);
}

// ---- transformers 5.17 fixtures (scripts/media_fixtures/positions.py) ----

const std::string kFixtureDir = std::string(VEOMNI_FIXTURES_DIR) + "/media/positions";

std::vector<VisionGrid> grids_of(const nlohmann::json& rows) {
  std::vector<VisionGrid> grids;
  for (const auto& r : rows) grids.push_back({r.at(0).get<int64_t>(), r.at(1).get<int64_t>(), r.at(2).get<int64_t>()});
  return grids;
}

template <typename T>
std::vector<T> read_vector(const SafetensorsReader& reader, const std::string& name) {
  const Tensor t = reader.read(name);
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

TEST(MropeHfFixtures, MatchTransformersExactly) {
  const std::string json_path = kFixtureDir + "/positions.json";
  const std::string tensors_path = kFixtureDir + "/positions.safetensors";
  ASSERT_TRUE(std::filesystem::exists(json_path) && std::filesystem::exists(tensors_path))
      << "missing " << json_path << " or " << tensors_path
      << ": run python3 scripts/media_fixtures/positions.py MEDIA_DIR tests/fixtures/media/positions";
  const nlohmann::json fixture = read_json_file(json_path);
  const SafetensorsReader reader(tensors_path);
  EXPECT_EQ(fixture.at("transformers_version").get<std::string>(), "5.17.0");
  int vl_cases = 0, omni_cases = 0;
  for (const auto& c : fixture.at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    SCOPED_TRACE(name);
    const auto ids = read_vector<int64_t>(reader, name + ".input_ids");
    const auto mask = read_vector<int64_t>(reader, name + ".attention_mask");
    const auto& token_ids = c.at("token_ids");
    if (c.at("model") == "qwen3_vl") {
      Qwen3VlRopeOptions options;
      options.image_token_id = token_ids.at("image_token_id").get<int64_t>();
      options.video_token_id = token_ids.at("video_token_id").get<int64_t>();
      const auto p = qwen3_vl_rope_index(ids, {grids_of(c.at("image_grids")), grids_of(c.at("video_grids"))},
                                         options, mask);
      EXPECT_EQ(p.position_ids, read_vector<int64_t>(reader, name + ".position_ids"));
      EXPECT_EQ(p.rope_delta, read_vector<int64_t>(reader, name + ".rope_delta").at(0));
      ++vl_cases;
      continue;
    }
    Qwen3OmniRopeOptions options;
    options.image_token_id = token_ids.at("image_token_id").get<int64_t>();
    options.video_token_id = token_ids.at("video_token_id").get<int64_t>();
    options.audio_token_id = token_ids.at("audio_token_id").get<int64_t>();
    options.vision_start_token_id = token_ids.at("vision_start_token_id").get<int64_t>();
    options.audio_start_token_id = token_ids.at("audio_start_token_id").get<int64_t>();
    options.position_id_per_seconds = c.at("position_id_per_seconds").get<double>();
    options.use_audio_in_video = c.at("use_audio_in_video").get<bool>();
    const Qwen3OmniMedia media{grids_of(c.at("image_grids")), grids_of(c.at("video_grids")),
                               c.at("video_second_per_grid").get<std::vector<double>>(),
                               c.at("audio_feature_lengths").get<std::vector<int64_t>>()};
    const auto p = qwen3_omni_rope_index(ids, media, options, mask);
    EXPECT_EQ(p.position_ids, read_vector<float>(reader, name + ".position_ids"));
    EXPECT_EQ(p.rope_delta, read_vector<float>(reader, name + ".rope_delta").at(0));
    ++omni_cases;
  }
  EXPECT_GE(vl_cases, 7);
  EXPECT_GE(omni_cases, 9);
}

TEST(MropeHfFixtures, DefaultIdsAgreeWithTransformersConfigs) {
  const std::string json_path = kFixtureDir + "/positions.json";
  ASSERT_TRUE(std::filesystem::exists(json_path)) << "missing " << json_path;
  const nlohmann::json fixture = read_json_file(json_path);
  const auto& vl = fixture.at("qwen3_vl_config_defaults");
  EXPECT_EQ(vl.at("image_token_id").get<int64_t>(), Qwen3VlRopeOptions{}.image_token_id);
  EXPECT_EQ(vl.at("video_token_id").get<int64_t>(), Qwen3VlRopeOptions{}.video_token_id);
  // The Omni thinker class defaults are Qwen2.5-Omni's; ours follow the checkpoints (see mrope_positions.h).
  const auto& omni = fixture.at("qwen3_omni_thinker_config_defaults");
  EXPECT_EQ(omni.at("image_token_id").get<int64_t>(), Qwen3OmniRopeOptions{}.image_token_id);
  EXPECT_EQ(omni.at("video_token_id").get<int64_t>(), Qwen3OmniRopeOptions{}.video_token_id);
}

}  // namespace
