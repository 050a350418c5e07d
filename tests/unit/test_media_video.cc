// Unit tests of video decoding (FFmpeg) and Qwen frame sampling: known cases, the ffmpeg CLI's RGB dumps, bad files,
// and the transformers fixtures (tests/fixtures/media/video, made by scripts/media_fixtures/video.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/tensor.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "media/bicubic_resize.h"
#include "media/video_decode.h"
#include "media/video_sampling.h"
#include "media/vision_processor.h"
#include "tests/common/scratch_dir.h"
#include "tests/unit/test_media_image_fixture.h"

using namespace veomni;

namespace {

using veomni::test::kMediaInputs;
using veomni::test::media_file_bytes;

const std::string kExpected = std::string(VEOMNI_FIXTURES_DIR) + "/media/video/";

void write_video_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Largest |a - b| over two frames of the same size.
int max_pixel_difference(const RgbImage& a, const std::vector<uint8_t>& b, size_t offset) {
  int worst = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) worst = std::max(worst, std::abs(int{a.pixels[i]} - int{b[offset + i]}));
  return worst;
}

// The message of the InputError `call` throws ("" when it throws none).
template <typename Call>
std::string video_input_error(Call&& call) {
  try {
    call();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

VideoSamplingConfig with_min_frames(int64_t min_frames) {
  VideoSamplingConfig config = qwen3_vl_video_sampling();
  config.min_frames = min_frames;
  return config;
}

}  // namespace

TEST(VideoSampling, Qwen3VlDefaultsAreTransformers517s) {
  const VideoSamplingConfig c = qwen3_vl_video_sampling();
  EXPECT_EQ(c.rule, FrameSamplingRule::kQwen3VL);
  EXPECT_EQ(c.fps, 2.0);
  EXPECT_EQ(c.min_frames, 4);
  EXPECT_EQ(c.max_frames, 768);
  EXPECT_EQ(c.temporal_patch_size, 2);
  EXPECT_EQ(c.patch_size * c.merge_size, 32);
  EXPECT_EQ(c.min_pixels, 131072);
  EXPECT_EQ(c.max_pixels, 786432);
  EXPECT_EQ(qwen3_omni_video_sampling().rule, FrameSamplingRule::kQwen2VL);
}

TEST(VideoSampling, Qwen3VlKnownIndices) {
  const VideoSamplingConfig c = qwen3_vl_video_sampling();
  // 30 frames at 10 fps, 2 fps wanted: 6 frames over linspace(0, 29, 6) = 0, 5.8, 11.6, 17.4, 23.2, 29
  EXPECT_EQ(sample_frame_indices(30, 10.0, c), (std::vector<int64_t>{0, 6, 12, 17, 23, 29}));
  EXPECT_EQ(sample_frame_indices(25, 10.0, c), (std::vector<int64_t>{0, 6, 12, 18, 24}));
  // Fewer than min_frames wanted: raised to 4, but never past the frame count.
  EXPECT_EQ(sample_frame_indices(3, 10.0, c), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(sample_frame_indices(1, 30.0, c), (std::vector<int64_t>{0}));
  EXPECT_EQ(sample_frame_indices(10, 30.0, c), (std::vector<int64_t>{0, 3, 6, 9}));
  // Long video: capped at max_frames, last frame exact.
  const auto capped = sample_frame_indices(100000, 30.0, c);
  ASSERT_EQ(capped.size(), 768u);
  EXPECT_EQ(capped.front(), 0);
  EXPECT_EQ(capped.back(), 99999);
  EXPECT_EQ(sample_frame_indices(10000, 30.0, c).size(), 666u);  // int(10000 / 30 * 2)
}

TEST(VideoSampling, Qwen3VlRoundsHalfToEven) {
  EXPECT_EQ(sample_frame_indices(6, 6.0, with_min_frames(3)), (std::vector<int64_t>{0, 2, 5}));     // 2.5 -> 2
  EXPECT_EQ(sample_frame_indices(16, 16.0, with_min_frames(3)), (std::vector<int64_t>{0, 8, 15}));  // 7.5 -> 8
}

TEST(VideoSampling, Qwen2VlRuleKeepsTemporalPatchMultiples) {
  const VideoSamplingConfig c = qwen3_omni_video_sampling();
  EXPECT_EQ(sample_frame_indices(30, 10.0, c), (std::vector<int64_t>{0, 5, 10, 15, 20, 25}));
  // 5 wanted -> 4; arange(0, 25, 6.25) truncated
  EXPECT_EQ(sample_frame_indices(25, 10.0, c), (std::vector<int64_t>{0, 6, 12, 18}));
  EXPECT_EQ(sample_frame_indices(3, 10.0, c), (std::vector<int64_t>{0, 1}));
  EXPECT_NE(video_input_error([&] { sample_frame_indices(1, 10.0, c); }), "");
}

TEST(VideoSampling, RejectsEmptyVideosAndBadRates) {
  const VideoSamplingConfig c = qwen3_vl_video_sampling();
  EXPECT_NE(video_input_error([&] { sample_frame_indices(0, 10.0, c); }), "");
  EXPECT_NE(video_input_error([&] { sample_frame_indices(10, 0.0, c); }), "");
  EXPECT_NE(video_input_error([&] { sample_frame_indices(10, NAN, c); }), "");
}

TEST(VideoSampling, TimestampsAverageEachTemporalPatch) {
  const auto even = qwen3_vl_frame_timestamps({0, 6, 12, 17, 23, 29}, 10.0, 2);
  ASSERT_EQ(even.size(), 3u);
  EXPECT_DOUBLE_EQ(even[0], 0.3);
  EXPECT_EQ(even[1], (1.2 + 1.7) / 2);
  EXPECT_EQ(qwen3_vl_timestamp_text(even[1]), "<1.4 seconds>");  // 1.45 is 1.4499999... in binary
  EXPECT_EQ(qwen3_vl_timestamp_text(even[2]), "<2.6 seconds>");
  // An odd count repeats the last frame: (2.4 + 2.4) / 2
  const auto odd = qwen3_vl_frame_timestamps({0, 6, 12, 18, 24}, 10.0, 2);
  ASSERT_EQ(odd.size(), 3u);
  EXPECT_DOUBLE_EQ(odd[1], 1.5);
  EXPECT_DOUBLE_EQ(odd[2], 2.4);
}

TEST(VideoSampling, TimestampTextRoundsAsPython) {
  EXPECT_EQ(qwen3_vl_timestamp_text(0.0), "<0.0 seconds>");
  EXPECT_EQ(qwen3_vl_timestamp_text(0.25), "<0.2 seconds>");  // exact tie -> even
  EXPECT_EQ(qwen3_vl_timestamp_text(0.75), "<0.8 seconds>");
  EXPECT_EQ(qwen3_vl_timestamp_text(0.35), "<0.3 seconds>");  // 0.34999... in binary
  EXPECT_EQ(qwen3_vl_timestamp_text(0.05), "<0.1 seconds>");  // 0.05000000000000000277
  EXPECT_EQ(qwen3_vl_timestamp_text(12.345), "<12.3 seconds>");
}

TEST(VideoSampling, VideoSmartResizeKnownShapes) {
  auto resize = [](int64_t t, int64_t h, int64_t w, int64_t lo = 131072, int64_t hi = 786432) {
    const ResizedShape s = video_smart_resize(t, h, w, 2, 32, lo, hi);
    return std::vector<int64_t>{s.height, s.width};
  };
  EXPECT_EQ(resize(6, 48, 64), (std::vector<int64_t>{128, 192}));  // up to the t*h*w minimum; ceil(4.0) stays 4
  EXPECT_EQ(resize(5, 40, 56), (std::vector<int64_t>{160, 192}));
  EXPECT_EQ(resize(2, 1080, 1920), (std::vector<int64_t>{448, 832}));
  EXPECT_EQ(resize(768, 1080, 1920), (std::vector<int64_t>{32, 32}));  // floor, but never below the factor
  EXPECT_EQ(resize(64, 720, 1280), (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(resize(16, 20, 300), (std::vector<int64_t>{32, 480}));  // short side first scaled up to 32
  EXPECT_EQ(resize(5, 40, 56, 1024, 6144), (std::vector<int64_t>{32, 32}));
  EXPECT_NE(video_input_error([] { video_smart_resize(1, 64, 64, 2, 32, 4096, 786432); }), "");
  EXPECT_NE(video_input_error([] { video_smart_resize(4, 10, 2500, 2, 32, 4096, 786432); }), "");
}

TEST(VideoSampling, FrameShapeFollowsTheRule) {
  const ResizedShape qwen3 = resized_video_frame_shape(6, 48, 64, qwen3_vl_video_sampling());
  EXPECT_EQ(qwen3.height, 128);
  EXPECT_EQ(qwen3.width, 192);
  // The Qwen2-VL rule bounds each frame alone: 48x64 -> 3072 < 131072 -> scaled up per frame.
  const ResizedShape qwen2 = resized_video_frame_shape(6, 48, 64, qwen3_omni_video_sampling());
  const ResizedShape image = smart_resize(48, 64, 32, 131072, 786432);
  EXPECT_EQ(qwen2.height, image.height);
  EXPECT_EQ(qwen2.width, image.width);
}

struct TestVideo {
  std::string file;
  double fps;
  int64_t frames, height, width;
};

class VideoDecode : public ::testing::TestWithParam<TestVideo> {};

TEST_P(VideoDecode, ProbeReportsRateCountAndSize) {
  const TestVideo& v = GetParam();
  const VideoInfo info = probe_video(kMediaInputs + v.file);
  EXPECT_EQ(info.fps, v.fps);
  EXPECT_EQ(info.num_frames, v.frames);
  EXPECT_EQ(info.height, v.height);
  EXPECT_EQ(info.width, v.width);
  EXPECT_DOUBLE_EQ(info.duration_seconds, static_cast<double>(v.frames) / v.fps);
}

// Every frame equals the ffmpeg CLI's rgb24 dump made with the same swscale settings: tolerance 0 (same library,
// same conversion path), which also proves B-frames come out in display order.
TEST_P(VideoDecode, EveryFrameMatchesTheRawDump) {
  const TestVideo& v = GetParam();
  const std::string stem = v.file.substr(0, v.file.rfind('.'));
  const std::vector<uint8_t> dump = media_file_bytes(kMediaInputs + stem + ".rgb");
  const auto frame_bytes = static_cast<size_t>(v.height * v.width * 3);
  ASSERT_EQ(dump.size(), frame_bytes * static_cast<size_t>(v.frames)) << stem << ".rgb";
  std::vector<int64_t> all(static_cast<size_t>(v.frames));
  for (int64_t i = 0; i < v.frames; ++i) all[static_cast<size_t>(i)] = i;
  const std::vector<RgbImage> frames = decode_video_frames(kMediaInputs + v.file, all);
  ASSERT_EQ(frames.size(), all.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    ASSERT_EQ(frames[i].height, v.height);
    ASSERT_EQ(frames[i].width, v.width);
    EXPECT_EQ(max_pixel_difference(frames[i], dump, i * frame_bytes), 0) << v.file << " frame " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(TestVideos, VideoDecode,
                         ::testing::Values(TestVideo{"video_h264.mp4", 10.0, 30, 48, 64},
                                           TestVideo{"video_vp9.webm", 10.0, 25, 40, 56},
                                           TestVideo{"video_mpeg4.avi", 12.0, 12, 32, 48}),
                         [](const auto& param_info) {
                           const std::string& f = param_info.param.file;
                           return f.substr(f.find('_') + 1, f.find('.') - f.find('_') - 1);
                         });

TEST(VideoDecodeSampled, Qwen3VlSamplesOfTheH264Video) {
  const SampledVideo video = decode_video(kMediaInputs + "video_h264.mp4", qwen3_vl_video_sampling());
  EXPECT_EQ(video.frame_indices, (std::vector<int64_t>{0, 6, 12, 17, 23, 29}));
  EXPECT_EQ(video.timestamps_seconds, (std::vector<double>{0.0, 0.6, 1.2, 1.7, 2.3, 2.9}));
  EXPECT_EQ(video.info.num_frames, 30);
  const std::vector<uint8_t> dump = media_file_bytes(kMediaInputs + "video_h264.rgb");
  ASSERT_EQ(video.frames.size(), 6u);
  for (size_t i = 0; i < video.frames.size(); ++i)
    EXPECT_EQ(max_pixel_difference(video.frames[i], dump, static_cast<size_t>(video.frame_indices[i]) * 64 * 48 * 3),
              0);
}

TEST(VideoDecodeSampled, RepeatedIndicesGiveEqualFrames) {
  const auto frames = decode_video_frames(kMediaInputs + "video_vp9.webm", {3, 3, 24});
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].pixels, frames[1].pixels);
  EXPECT_NE(frames[1].pixels, frames[2].pixels);
  EXPECT_TRUE(decode_video_frames(kMediaInputs + "video_vp9.webm", {}).empty());
}

class VideoDecodeErrors : public veomni::testing::ScratchDir {
 protected:
  // InputError naming `path`, containing `words`, from decode_video and (for file-level faults) probe_video.
  static void expect_rejected(const std::string& path, const std::string& words) {
    const std::string message = video_input_error([&] { decode_video(path, qwen3_vl_video_sampling()); });
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(words), std::string::npos) << message;
  }
};

TEST_F(VideoDecodeErrors, MissingFile) { expect_rejected(path("nothing.mp4"), "not found"); }

TEST_F(VideoDecodeErrors, NotAVideo) {
  write_video_bytes(path("text.mp4"), std::vector<uint8_t>(2000, 'x'));
  expect_rejected(path("text.mp4"), "not a readable video container");
}

TEST_F(VideoDecodeErrors, TruncatedMp4) {
  std::vector<uint8_t> bytes = media_file_bytes(kMediaInputs + "video_h264.mp4");
  bytes.resize(bytes.size() / 2);  // the index (moov) sits at the end: it is lost
  write_video_bytes(path("half.mp4"), bytes);
  expect_rejected(path("half.mp4"), "not a readable video container");
}

TEST_F(VideoDecodeErrors, AudioOnlyFile) { expect_rejected(kMediaInputs + "video_audio_only.wav", "no video stream"); }

TEST_F(VideoDecodeErrors, CoverArtIsNotAVideo) {
  expect_rejected(kMediaInputs + "video_cover_art.mp3", "only attached cover art");
}

TEST_F(VideoDecodeErrors, VideoStreamWithoutFrames) {
  expect_rejected(kMediaInputs + "video_zero_frames.avi", "holds no frames");
}

TEST_F(VideoDecodeErrors, UnsupportedCodec) {
  std::vector<uint8_t> bytes = media_file_bytes(kMediaInputs + "video_vp9.webm");
  const std::string id = "V_VP9";
  auto at = std::search(bytes.begin(), bytes.end(), id.begin(), id.end());
  ASSERT_NE(at, bytes.end());
  std::copy_n("V_QQQ", 5, at);  // a Matroska codec id no decoder knows
  write_video_bytes(path("unknown.webm"), bytes);
  expect_rejected(path("unknown.webm"), "unsupported video codec");
}

TEST_F(VideoDecodeErrors, IndexPastTheLastFrame) {
  const std::string video = kMediaInputs + "video_h264.mp4";
  const std::string message = video_input_error([&] { decode_video_frames(video, {29, 30}); });
  EXPECT_NE(message.find(video), std::string::npos) << message;
  EXPECT_NE(message.find("only 30 frames decode"), std::string::npos) << message;
}

// ---- transformers fixtures ----------------------------------------------------------------------------------------

namespace {

nlohmann::json read_expected_json(const std::string& name) {
  const std::string file = kExpected + name;
  if (!std::filesystem::exists(file))
    ADD_FAILURE() << "missing fixture " << file << " (run scripts/media_fixtures/video.py on the GPU machine)";
  return std::filesystem::exists(file) ? read_json_file(file) : nlohmann::json();
}

VideoSamplingConfig config_of_row(const nlohmann::json& row) {
  VideoSamplingConfig c = row["rule"] == "qwen3_vl" ? qwen3_vl_video_sampling() : qwen3_omni_video_sampling();
  c.fps = row["fps"].get<double>();
  c.min_frames = row["min_frames"].get<int64_t>();
  c.max_frames = row["max_frames"].get<int64_t>();
  c.temporal_patch_size = row["temporal_patch_size"].get<int64_t>();
  return c;
}

}  // namespace

TEST(VideoHfFixtures, SamplingTableMatchesTransformers) {
  const nlohmann::json tables = read_expected_json("tables.json");
  if (tables.is_null()) return;
  ASSERT_GT(tables["sampling"].size(), 100u);
  for (const auto& row : tables["sampling"]) {
    const int64_t n = row["num_frames"].get<int64_t>();
    const double video_fps = row["video_fps"].get<double>();
    const VideoSamplingConfig config = config_of_row(row);
    if (row["indices"].is_null()) {
      EXPECT_NE(video_input_error([&] { sample_frame_indices(n, video_fps, config); }), "") << row.dump();
    } else {
      EXPECT_EQ(sample_frame_indices(n, video_fps, config), row["indices"].get<std::vector<int64_t>>()) << row.dump();
    }
  }
}

TEST(VideoHfFixtures, SmartResizeTableMatchesTransformers) {
  const nlohmann::json tables = read_expected_json("tables.json");
  if (tables.is_null()) return;
  for (const auto& row : tables["video_smart_resize"]) {
    auto resize = [&] {
      return video_smart_resize(row["num_frames"].get<int64_t>(), row["height"].get<int64_t>(),
                                row["width"].get<int64_t>(), 2, 32, row["min_pixels"].get<int64_t>(),
                                row["max_pixels"].get<int64_t>());
    };
    if (row["resized"].is_null()) {
      EXPECT_NE(video_input_error(resize), "") << row.dump();
    } else {
      const ResizedShape s = resize();
      EXPECT_EQ((std::vector<int64_t>{s.height, s.width}), row["resized"].get<std::vector<int64_t>>()) << row.dump();
    }
  }
}

TEST(VideoHfFixtures, TimestampTableMatchesTransformers) {
  const nlohmann::json tables = read_expected_json("tables.json");
  if (tables.is_null()) return;
  for (const auto& row : tables["timestamps"]) {
    if (row.contains("seconds")) {
      EXPECT_EQ(qwen3_vl_timestamp_text(row["seconds"].get<double>()), row["text"].get<std::string>());
      continue;
    }
    const auto ours = qwen3_vl_frame_timestamps(row["indices"].get<std::vector<int64_t>>(),
                                                row["video_fps"].get<double>(), row["merge_size"].get<int64_t>());
    EXPECT_EQ(ours, row["timestamps"].get<std::vector<double>>()) << row.dump();
    std::vector<std::string> texts;
    for (const double t : ours) texts.push_back(qwen3_vl_timestamp_text(t));
    EXPECT_EQ(texts, row["texts"].get<std::vector<std::string>>());
  }
}

// Our whole video path (decode, sample, video_smart_resize, bicubic, patchify) against Qwen3VLVideoProcessor fed the
// ffmpeg CLI's frames: grid and indices identical, pixel_values_videos within 2e-2 (stored as float16).
class VideoHfCase : public ::testing::TestWithParam<std::string> {};

TEST_P(VideoHfCase, PixelValuesMatchTransformers) {
  const nlohmann::json expected = read_expected_json("case_" + GetParam() + ".json");
  if (expected.is_null()) return;
  VideoSamplingConfig config = qwen3_vl_video_sampling();
  config.min_pixels = expected["size"]["shortest_edge"].get<int64_t>();
  config.max_pixels = expected["size"]["longest_edge"].get<int64_t>();
  config.fps = expected["fps"].get<double>();
  const SampledVideo video = decode_video(kMediaInputs + expected["input"].get<std::string>(), config);
  EXPECT_EQ(video.info.fps, expected["video_fps"].get<double>());
  EXPECT_EQ(video.info.num_frames, expected["num_frames"].get<int64_t>());
  EXPECT_EQ(video.frame_indices, expected["frame_indices"].get<std::vector<int64_t>>());

  std::vector<std::string> texts;
  for (const double t : qwen3_vl_frame_timestamps(video.frame_indices, video.info.fps, config.temporal_patch_size))
    texts.push_back(qwen3_vl_timestamp_text(t));
  EXPECT_EQ(texts, expected["timestamp_texts"].get<std::vector<std::string>>());

  const ResizedShape shape = resized_video_frame_shape(static_cast<int64_t>(video.frames.size()), video.info.height,
                                                       video.info.width, config);
  std::vector<RgbImage> resized;
  for (const RgbImage& frame : video.frames) resized.push_back(resize_bicubic(frame, shape.height, shape.width));
  VisionProcessorConfig vision = qwen3_vl_image_config();
  const VisionPatches patches = patchify_frames(resized, vision);

  const SafetensorsReader reader(kExpected + "case_" + GetParam() + ".safetensors");
  const Tensor grid = reader.read("video_grid_thw");
  ASSERT_EQ(grid.numel(), 3);
  EXPECT_EQ((std::vector<int64_t>(patches.grid_thw.begin(), patches.grid_thw.end())),
            (std::vector<int64_t>(grid.data<int64_t>(), grid.data<int64_t>() + 3)));
  const Tensor ref = reader.read("pixel_values_videos");
  ASSERT_EQ(patches.pixel_values.shape(), ref.shape());
  const std::vector<float> ours = patches.pixel_values.to_float_vector();
  const std::vector<float> theirs = ref.to_dtype(DType::F32).to_float_vector();
  double worst = 0;
  for (size_t i = 0; i < ours.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(ours[i]) - theirs[i]));
  EXPECT_LE(worst, 2e-2);
  RecordProperty("max_abs_err", std::to_string(worst));
}

INSTANTIATE_TEST_SUITE_P(Cases, VideoHfCase, ::testing::Values("h264_default", "vp9_small"));
