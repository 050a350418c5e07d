// Pictures turned to their EXIF orientation and 4-channel JPEGs converted to RGB as transformers' load_image (PIL's
// exif_transpose + convert("RGB")) gives them: the eight orientations on hand-written layouts, Pillow's CMYK rule
// on hand-computed values, the test images of make_exif_cmyk_images, and (once generated) transformers' own output
// on them (scripts/gen_image_orientation_fixtures.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/json_file.h"
#include "io/safetensors.h"
#include "media/cmyk_to_rgb.h"
#include "media/image_decode.h"
#include "media/image_orientation.h"
#include "media/vision_processor.h"
#include "tests/unit/test_media_image_fixture.h"

using namespace veomni;

namespace {

using veomni::test::kMediaInputs;

const std::string kOrientationFixtures = std::string(VEOMNI_FIXTURES_DIR) + "/media/orientation/";

// A picture whose pixel (y, x) is the letter rows[y][x] in all three channels.
RgbImage letters(const std::vector<std::string>& rows) {
  RgbImage image{static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size()), {}};
  for (const std::string& row : rows)
    for (char c : row) image.pixels.insert(image.pixels.end(), 3, static_cast<uint8_t>(c));
  return image;
}

std::vector<std::string> as_letters(const RgbImage& image) {
  std::vector<std::string> rows;
  for (int64_t y = 0; y < image.height; ++y) {
    rows.emplace_back();
    for (int64_t x = 0; x < image.width; ++x) rows.back().push_back(static_cast<char>(image.at(y, x, 0)));
  }
  return rows;
}

int orientation_level_difference(const RgbImage& a, const RgbImage& b) {
  int worst = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) worst = std::max(worst, std::abs(a.pixels[i] - b.pixels[i]));
  return worst;
}

// make_exif_cmyk_images' displayed picture: 40 x 64 pixels of 8x8 blocks, block (r, c) in colour
// (32c + 16, 48r + 24, 255 - 28c - 9r).
constexpr int64_t kHeight = 40, kWidth = 64;
std::array<int, 3> block_colour(int64_t y, int64_t x) {
  const int r = static_cast<int>(y / 8), c = static_cast<int>(x / 8);
  return {32 * c + 16, 48 * r + 24, 255 - 28 * c - 9 * r};
}

// The largest difference between `image` and the generator's displayed picture.
int difference_from_pattern(const RgbImage& image) {
  int worst = 0;
  for (int64_t y = 0; y < image.height; ++y)
    for (int64_t x = 0; x < image.width; ++x)
      for (int c = 0; c < 3; ++c) worst = std::max(worst, std::abs(image.at(y, x, c) - block_colour(y, x)[c]));
  return worst;
}

void expect_displayed_pattern(const std::string& file, int tolerance) {
  SCOPED_TRACE(file);
  const RgbImage image = decode_image(kMediaInputs + file);
  ASSERT_EQ(image.height, kHeight);
  ASSERT_EQ(image.width, kWidth);
  EXPECT_LE(difference_from_pattern(image), tolerance);
}

// Pillow's CMYK -> RGB for one pixel, from the formula in its own terms (CMYK;I: ink = 255 - sample; cmyk2rgb:
// clip(nk - round(ink * nk / 255)) with nk = 255 - black ink), rounding with exact arithmetic.
std::array<int, 3> pillow_rgb_of_inks(int c, int m, int y, int k) {
  const int nk = 255 - k;
  auto channel = [&](int ink) { return std::clamp(nk - static_cast<int>(std::lround(ink * nk / 255.0)), 0, 255); };
  return {channel(c), channel(m), channel(y)};
}

}  // namespace

// Stored [[a b c], [d e f]], displayed per the EXIF 2.3 orientation definitions (what row 0 and column 0 of the
// stored picture are on the display): 2 row 0 top, column 0 right; 3 bottom, right; 4 bottom, left; 5 row 0 left,
// column 0 top; 6 right, top; 7 right, bottom; 8 left, bottom.
TEST(MediaImageOrientation, EachOrientationPlacesTheStoredPixelsAsExifDefines) {
  const RgbImage stored = letters({"abc", "def"});
  const std::vector<std::vector<std::string>> displayed = {
      {"abc", "def"},       // 1
      {"cba", "fed"},       // 2
      {"fed", "cba"},       // 3
      {"def", "abc"},       // 4
      {"ad", "be", "cf"},   // 5
      {"da", "eb", "fc"},   // 6: turned 90 degrees clockwise
      {"fc", "eb", "da"},   // 7
      {"cf", "be", "ad"}};  // 8: turned 90 degrees counter-clockwise
  for (int k = 1; k <= 8; ++k) EXPECT_EQ(as_letters(apply_orientation(stored, k)), displayed[k - 1]) << "orientation " << k;
}

TEST(MediaImageOrientation, OtherValuesLeaveThePicture) {
  const RgbImage stored = letters({"abc", "def"});
  for (int k : {0, 9, -1, 65535}) EXPECT_EQ(apply_orientation(stored, k).pixels, stored.pixels) << k;
}

// ink (100, 200, 0) with black 50, samples stored inverted (155, 55, 255, 205): nk = 205;
// 100 * 205 / 255 = 80.4 -> 125; 200 * 205 / 255 = 160.8 -> 44; 0 -> 205.
TEST(MediaCmykToRgb, HandComputedPixels) {
  const std::vector<uint8_t> cmyk = {155, 55, 255, 205,   // the case above
                                     255, 255, 255, 255,  // no ink: white
                                     0, 0, 0, 255,        // full cyan, magenta, yellow, no black: black
                                     255, 255, 255, 0,    // full black
                                     128, 200, 10, 100};  // ink (127, 55, 245), black 155: nk 100 -> (50, 78, 4)
  std::vector<uint8_t> rgb(15);
  inverted_cmyk_to_rgb(cmyk.data(), rgb.data(), 5);
  EXPECT_EQ(rgb, (std::vector<uint8_t>{125, 44, 205, 255, 255, 255, 0, 0, 0, 0, 0, 0, 50, 78, 4}));
}

TEST(MediaCmykToRgb, AgreesWithTheExactFormulaEverywhere) {
  for (int k = 0; k < 256; k += 3)
    for (int ink = 0; ink < 256; ++ink) {
      const uint8_t cmyk[4] = {static_cast<uint8_t>(255 - ink), static_cast<uint8_t>(255 - ink),
                               static_cast<uint8_t>(255 - ink), static_cast<uint8_t>(255 - k)};
      uint8_t rgb[3];
      inverted_cmyk_to_rgb(cmyk, rgb, 1);
      ASSERT_EQ(rgb[0], pillow_rgb_of_inks(ink, ink, ink, k)[0]) << "ink " << ink << " black " << k;
    }
}

// Each file stores the displayed picture turned by its orientation; decoding must give back the displayed one.
TEST(MediaImageOrientationFiles, EveryExifOrientationDisplaysUpright) {
  for (int k = 1; k <= 8; ++k) expect_displayed_pattern("image_exif_orient" + std::to_string(k) + "_40x64.jpg", 2);
  for (int k : {3, 6, 8}) expect_displayed_pattern("image_exif_be_orient" + std::to_string(k) + "_40x64.jpg", 2);
}

TEST(MediaImageOrientationFiles, AllOrientationsDecodeToTheSamePixels) {
  const RgbImage upright = decode_image(kMediaInputs + "image_exif_orient1_40x64.jpg");
  for (int k = 2; k <= 8; ++k) {
    const RgbImage turned = decode_image(kMediaInputs + "image_exif_orient" + std::to_string(k) + "_40x64.jpg");
    ASSERT_EQ(turned.height, upright.height) << k;
    EXPECT_EQ(orientation_level_difference(turned, upright), 0) << k;
  }
}

// Displayed 40 x 64 (wide): its patches grid is wide too, whatever the orientation it was stored in.
TEST(MediaImageOrientationFiles, GridFollowsTheDisplayedShape) {
  const VisionPatches upright =
      process_image(decode_image(kMediaInputs + "image_exif_orient1_40x64.jpg"), qwen3_vl_image_config());
  const VisionPatches turned =
      process_image(decode_image(kMediaInputs + "image_exif_orient6_40x64.jpg"), qwen3_vl_image_config());
  EXPECT_EQ(upright.grid_thw, (std::array<int64_t, 3>{1, 14, 22}));  // smart_resize: 224 x 352
  EXPECT_EQ(turned.grid_thw, upright.grid_thw);
  EXPECT_EQ(turned.pixel_values.shape(), upright.pixel_values.shape());
}

// Pillow reads orientation 1 from these: a value offset past the block ends IFD0 before Orientation 6, and a TIFF
// header it refuses. Both files store the picture upright.
TEST(MediaImageOrientationFiles, MalformedExifKeepsThePictureAsStored) {
  expect_displayed_pattern("image_exif_cut_orient6_40x64.jpg", 2);
  expect_displayed_pattern("image_exif_badheader_40x64.jpg", 2);
}

TEST(MediaImageOrientationFiles, XmpOrientationAppliesWithoutExif) { expect_displayed_pattern("image_xmp_orient6_40x64.jpg", 2); }

TEST(MediaImageOrientationFiles, PngExifChunkApplies) { expect_displayed_pattern("image_png_exif_orient6_40x64.png", 0); }

// make_exif_cmyk_images' CMYK picture: block (r, c) inks cyan 36c, magenta 40r, yellow 255 - 32c, black 12(c + r),
// stored inverted. Pillow inverts every 4-channel JPEG, with or without Adobe's marker.
TEST(MediaImageCmykFiles, FourChannelJpegsConvertAsPillow) {
  for (const auto& [file, tolerance] : std::vector<std::pair<std::string, int>>{
           {"image_cmyk_adobe_40x64.jpg", 0}, {"image_cmyk_plain_40x64.jpg", 0}, {"image_ycck_40x64.jpg", 3},
           {"image_ycck_orient8_40x64.jpg", 3}}) {
    SCOPED_TRACE(file);
    const RgbImage image = decode_image(kMediaInputs + file);
    ASSERT_EQ(image.height, kHeight);
    ASSERT_EQ(image.width, kWidth);
    int worst = 0;
    for (int64_t y = 0; y < kHeight; ++y)
      for (int64_t x = 0; x < kWidth; ++x) {
        const int r = static_cast<int>(y / 8), c = static_cast<int>(x / 8);
        const std::array<int, 3> expected = pillow_rgb_of_inks(36 * c, 40 * r, 255 - 32 * c, 12 * (c + r));
        for (int ch = 0; ch < 3; ++ch) worst = std::max(worst, std::abs(image.at(y, x, ch) - expected[ch]));
      }
    EXPECT_LE(worst, tolerance);
  }
}

// transformers' load_image + Qwen2VLImageProcessor (torchvision backend) on every image above: the decoded RGB
// exactly, and pixel_values / image_grid_thw as ProcessImageMatchesTransformers compares them. The fixtures in
// tests/fixtures/media/orientation/ are made by python3 scripts/gen_image_orientation_fixtures.py.
TEST(MediaOrientationFixtures, MatchTransformersLoadImage) {
  const std::string cases_path = kOrientationFixtures + "cases.json";
  ASSERT_TRUE(std::filesystem::exists(cases_path))
      << "missing fixture " << cases_path << " (make it with: python3 scripts/gen_image_orientation_fixtures.py)";
  const nlohmann::json meta = read_json_file(cases_path);
  SafetensorsReader decoded(kOrientationFixtures + "decoded.safetensors");
  ASSERT_GE(decoded.entries().size(), 17u);
  for (const SafetensorsEntry& entry : decoded.entries()) {
    SCOPED_TRACE(entry.name);
    const Tensor hwc = decoded.read(entry.name);
    const RgbImage ours = decode_image(kMediaInputs + entry.name);
    ASSERT_EQ(ours.height, hwc.dim(0));
    ASSERT_EQ(ours.width, hwc.dim(1));
    const uint8_t* expected = hwc.data<uint8_t>();
    EXPECT_TRUE(std::equal(ours.pixels.begin(), ours.pixels.end(), expected)) << "decoded pixels differ";
  }
  ASSERT_GE(meta["cases"].size(), 17u);
  for (const nlohmann::json& c : meta["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    int64_t rows = 0;
    const double max_error = test::image_fixture_max_error(c, kMediaInputs, kOrientationFixtures, &rows);
    std::printf("[ orientation fixture ] %s: max |ours - HF| = %g over %lld rows\n", name.c_str(), max_error,
                static_cast<long long>(rows));
    EXPECT_EQ(max_error, 0.0) << "the image fixtures are bit-exact: a difference means decode, turn or resize drifted";
  }
}
