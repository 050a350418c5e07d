// The Qwen-VL vision processor: smart_resize rules, preprocessor_config.json reading, patch order on hand-made
// frames, and whole-image pixel_values / image_grid_thw against transformers 5.17 (scripts/media_fixtures/image.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "media/image_decode.h"
#include "media/vision_processor.h"
#include "tests/common/scratch_dir.h"
#include "tests/unit/test_media_image_fixture.h"

using namespace veomni;

namespace {

using veomni::test::kMediaInputs;

const std::string kVisionFixtures = std::string(VEOMNI_FIXTURES_DIR) + "/media/image/";

// Pixel value 100*c + 10*y + x: every sample names its own channel and position.
RgbImage labelled_image(int64_t height, int64_t width, int offset = 0) {
  RgbImage image{height, width, {}};
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c) image.pixels.push_back(static_cast<uint8_t>(offset + 100 * c + 10 * y + x));
  return image;
}

// Patch 2, merge 2, temporal 2, and an identity normalisation (mean 0, std 1, no rescale): values stay raw.
VisionProcessorConfig tiny_identity_config() {
  VisionProcessorConfig config;
  config.patch_size = 2;
  config.merge_size = 2;
  config.temporal_patch_size = 2;
  config.image_mean = {0, 0, 0};
  config.image_std = {1, 1, 1};
  config.rescale_factor = 1.0;
  return config;
}

std::vector<float> row_of(const Tensor& t, int64_t row) {
  const float* p = t.data<float>() + row * t.dim(1);
  return {p, p + t.dim(1)};
}

void expect_smart_resize(int64_t h, int64_t w, int64_t factor, int64_t min_pixels, int64_t max_pixels,
                         int64_t expected_h, int64_t expected_w) {
  const ResizedShape s = smart_resize(h, w, factor, min_pixels, max_pixels);
  EXPECT_EQ(s.height, expected_h) << h << "x" << w;
  EXPECT_EQ(s.width, expected_w) << h << "x" << w;
}

}  // namespace

// Expected values from transformers' smart_resize run in Python on the same arguments.
TEST(MediaVisionSmartResize, KnownValues) {
  expect_smart_resize(48, 64, 32, 4096, 16384, 64, 64);
  expect_smart_resize(33, 77, 32, 4096, 16384, 64, 128);                   // below min: ceil after scaling up
  expect_smart_resize(100, 300, 32, 4096, 16384, 64, 192);                 // above max: floor after scaling down
  expect_smart_resize(48, 64, 32, 65536, 16777216, 224, 320);              // Qwen3-VL limits
  expect_smart_resize(1080, 1920, 32, 65536, 16777216, 1088, 1920);        // in range: nearest multiples
  expect_smart_resize(4000, 6000, 32, 65536, 16777216, 3328, 4992);        // 24 MP down to 16 MP
  expect_smart_resize(1000, 1000, 28, 56 * 56, 28 * 28 * 1280, 980, 980);  // Qwen2-VL's factor and limits
}

TEST(MediaVisionSmartResize, RoundsHalfToEven) {
  expect_smart_resize(80, 80, 32, 1, 1'000'000'000, 64, 64);      // 2.5 -> 2
  expect_smart_resize(112, 112, 32, 1, 1'000'000'000, 128, 128);  // 3.5 -> 4
  expect_smart_resize(48, 48, 32, 1, 1'000'000'000, 64, 64);      // 1.5 -> 2
  expect_smart_resize(60, 80, 32, 4096, 16384, 64, 64);           // 80/32 = 2.5 -> 2 (half up would give 96)
}

TEST(MediaVisionSmartResize, NeverBelowOneFactor) {
  expect_smart_resize(32, 6400, 32, 1, 32 * 32 * 10, 32, 1408);  // the short side floors to 0 -> factor
  expect_smart_resize(16, 3200, 32, 1, 1'000'000'000, 32, 32);   // 16/32 = 0.5 -> 0, then scaled up
}

TEST(MediaVisionSmartResize, AspectRatioAbove200IsAnInputError) {
  EXPECT_NO_THROW(smart_resize(16, 3200, 32, 1, 1'000'000'000));  // exactly 200 is allowed
  try {
    smart_resize(16, 3201, 32, 1, 1'000'000'000, "tall.png");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tall.png"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("aspect ratio"), std::string::npos) << e.what();
  }
  EXPECT_THROW(process_image(labelled_image(1, 201), qwen3_vl_image_config(), "strip.png"), InputError);
}

TEST(MediaVisionConfig, Qwen3VlDefaults) {
  const VisionProcessorConfig c = qwen3_vl_image_config();
  EXPECT_EQ(c.patch_size, 16);
  EXPECT_EQ(c.temporal_patch_size, 2);
  EXPECT_EQ(c.merge_size, 2);
  EXPECT_EQ(c.min_pixels, 65536);
  EXPECT_EQ(c.max_pixels, 16777216);
  EXPECT_EQ(c.image_mean, (std::array<double, 3>{0.5, 0.5, 0.5}));
  EXPECT_EQ(c.image_std, (std::array<double, 3>{0.5, 0.5, 0.5}));
  EXPECT_DOUBLE_EQ(c.rescale_factor, 1.0 / 255);
}

class MediaVisionConfigFile : public veomni::testing::ScratchDir {
 protected:
  std::string write(const std::string& text) {
    const std::string file = path("preprocessor_config.json");
    std::ofstream(file) << text;
    return file;
  }
  void expect_error(const std::string& text, const std::string& fragment) {
    const std::string file = write(text);
    try {
      vision_config_from_json(file, qwen3_vl_image_config());
      ADD_FAILURE() << text << ": accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  }
};

TEST_F(MediaVisionConfigFile, ReadsAQwen3VlCheckpointFile) {
  const VisionProcessorConfig c = vision_config_from_json(write(R"({
    "size": {"longest_edge": 1000000, "shortest_edge": 3136},
    "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
    "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
    "rescale_factor": 0.00392156862745098, "do_resize": true, "resample": 3,
    "processor_class": "Qwen3VLProcessor", "image_processor_type": "Qwen2VLImageProcessorFast"})"),
                                                          qwen3_vl_image_config());
  EXPECT_EQ(c.min_pixels, 3136);
  EXPECT_EQ(c.max_pixels, 1000000);
  EXPECT_EQ(c.patch_size, 14);
  EXPECT_DOUBLE_EQ(c.image_mean[2], 0.40821073);
  EXPECT_DOUBLE_EQ(c.image_std[0], 0.26862954);
  EXPECT_DOUBLE_EQ(c.rescale_factor, 0.00392156862745098);
}

TEST_F(MediaVisionConfigFile, MinMaxPixelsOverrideSizeAndMissingKeysKeepDefaults) {
  const VisionProcessorConfig c =
      vision_config_from_json(write(R"({"size": {"shortest_edge": 100, "longest_edge": 200000}, "max_pixels": 50000})"),
                              qwen3_vl_image_config());
  EXPECT_EQ(c.min_pixels, 100);
  EXPECT_EQ(c.max_pixels, 50000);
  EXPECT_EQ(c.patch_size, 16);
  EXPECT_EQ(c.image_mean[0], 0.5);
}

TEST_F(MediaVisionConfigFile, ReadsTheNestedProcessorConfig) {
  const VisionProcessorConfig c = vision_config_from_json(
      write(R"({"image_processor": {"min_pixels": 1024, "max_pixels": 4096}})"), qwen3_vl_image_config());
  EXPECT_EQ(c.min_pixels, 1024);
  EXPECT_EQ(c.max_pixels, 4096);
}

TEST_F(MediaVisionConfigFile, BadValuesAreInputErrors) {
  expect_error(R"({"patch_size": "16"})", "patch_size");
  expect_error(R"({"merge_size": 0})", "merge_size");
  expect_error(R"({"size": {"shortest_edge": 100}})", "longest_edge");
  expect_error(R"({"image_mean": [0.5, 0.5]})", "image_mean");
  expect_error(R"({"image_std": [0.5, 0, 0.5]})", "image_std");
  expect_error(R"({"min_pixels": 5000, "max_pixels": 4000})", "exceed");
  expect_error(R"({"do_normalize": false})", "do_normalize");
  expect_error(R"({"resample": 2})", "resample");
  expect_error(R"([1, 2])", "JSON object");
}

// A 4x8 image with patch 2 and merge 2: grid (1, 2, 4); rows walk merge windows (2x2 patches) left to right.
TEST(MediaVisionPatchify, MergeWindowOrderAndFeatureLayout) {
  const VisionPatches out = patchify_frames({labelled_image(4, 8)}, tiny_identity_config());
  EXPECT_EQ(out.grid_thw, (std::array<int64_t, 3>{1, 2, 4}));
  ASSERT_EQ(out.pixel_values.shape(), (Shape{8, 24}));
  // Patch top-left corners in row order: window (0,0): (0,0) (0,2) (2,0) (2,2); window (0,1): (0,4) (0,6) ...
  const int corners[8][2] = {{0, 0}, {0, 2}, {2, 0}, {2, 2}, {0, 4}, {0, 6}, {2, 4}, {2, 6}};
  for (int row = 0; row < 8; ++row) {
    const int y = corners[row][0], x = corners[row][1];
    std::vector<float> expected;  // (channel, frame, y, x); both frames are the image
    for (int c = 0; c < 3; ++c)
      for (int t = 0; t < 2; ++t)
        for (int dy = 0; dy < 2; ++dy)
          for (int dx = 0; dx < 2; ++dx) expected.push_back(static_cast<float>(100 * c + 10 * (y + dy) + x + dx));
    EXPECT_EQ(row_of(out.pixel_values, row), expected) << "row " << row;
  }
  // Spelled out for row 1 (patch at y 0, x 2), channel 0 then channel 1:
  const std::vector<float> row1 = row_of(out.pixel_values, 1);
  EXPECT_EQ(std::vector<float>(row1.begin(), row1.begin() + 10),
            (std::vector<float>{2, 3, 12, 13, 2, 3, 12, 13, 102, 103}));
}

TEST(MediaVisionPatchify, OddFrameCountRepeatsTheLastFrame) {
  const std::vector<RgbImage> frames = {labelled_image(4, 4, 0), labelled_image(4, 4, 1), labelled_image(4, 4, 2)};
  const VisionPatches out = patchify_frames(frames, tiny_identity_config());
  EXPECT_EQ(out.grid_thw, (std::array<int64_t, 3>{2, 2, 2}));
  ASSERT_EQ(out.pixel_values.dim(0), 8);
  // Row 0 is t = 0 (frames 0, 1), row 4 is t = 1 (frames 2 and 2 again); feature 4 is channel 0, second frame, (0,0).
  EXPECT_EQ(row_of(out.pixel_values, 0)[0], 0.0f);
  EXPECT_EQ(row_of(out.pixel_values, 0)[4], 1.0f);
  EXPECT_EQ(row_of(out.pixel_values, 4)[0], 2.0f);
  EXPECT_EQ(row_of(out.pixel_values, 4)[4], 2.0f);
}

TEST(MediaVisionPatchify, NormalisesAsHfFusedRescaleNormalize) {
  RgbImage image{32, 32, std::vector<uint8_t>(32 * 32 * 3, 0)};
  image.pixels[0] = 255;  // (0,0) red
  image.pixels[1] = 128;  // (0,0) green
  const VisionPatches out = patchify_frames({image}, qwen3_vl_image_config());
  ASSERT_EQ(out.pixel_values.shape(), (Shape{4, 1536}));
  const float* v = out.pixel_values.data<float>();
  EXPECT_EQ(v[0], 1.0f);                          // (255 - 127.5) / 127.5
  EXPECT_EQ(v[512], (128.0f - 127.5f) / 127.5f);  // channel 1 starts after 2 frames x 16 x 16
  EXPECT_EQ(v[1], -1.0f);
}

TEST(MediaVisionPatchify, FramesOfWrongSizeAreRejected) {
  EXPECT_THROW(patchify_frames({labelled_image(4, 6)}, qwen3_vl_image_config()), Error);
  EXPECT_THROW(patchify_frames({labelled_image(4, 4), labelled_image(4, 8)}, tiny_identity_config()), Error);
}

TEST(MediaVisionProcess, ImageTokensFollowTheGrid) {
  const VisionPatches out =
      process_image(decode_image(kMediaInputs + "image_photo_100x300.jpg"), qwen3_vl_image_config());
  // 100x300 scaled up past 65536 pixels: 160x448 -> grid (1, 10, 28), 280 patches, 70 tokens after merging.
  EXPECT_EQ(out.grid_thw, (std::array<int64_t, 3>{1, 10, 28}));
  EXPECT_EQ(out.pixel_values.shape(), (Shape{280, 1536}));
}

// pixel_values and image_grid_thw of transformers' Qwen2VLImageProcessor (torchvision backend) on the same files.
TEST(MediaVisionFixtures, ProcessImageMatchesTransformers) {
  const std::string cases_path = kVisionFixtures + "cases.json";
  if (!std::filesystem::exists(cases_path)) {
    FAIL() << "missing fixture " << cases_path
           << " (make it with: python3 scripts/media_fixtures/image.py tests/fixtures/media/inputs "
              "tests/fixtures/media/image)";
  }
  const nlohmann::json meta = read_json_file(cases_path);
  ASSERT_GE(meta["cases"].size(), 4u);
  for (const nlohmann::json& c : meta["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    int64_t rows = 0;
    const double max_error = test::image_fixture_max_error(c, kMediaInputs, kVisionFixtures, &rows);
    RecordProperty(name + "_max_abs_error", std::to_string(max_error));
    std::printf("[ image fixture ] %s: max |ours - HF| = %g over %lld rows\n", name.c_str(), max_error,
                static_cast<long long>(rows));
    EXPECT_LE(max_error, 2e-2);
    EXPECT_EQ(max_error, 0.0) << "bit-exact with HF so far: a difference means the resize or decode drifted";
  }
}
