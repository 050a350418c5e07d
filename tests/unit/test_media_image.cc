// Image decoding (PNG/JPEG -> RGB as PIL's convert("RGB")) and torchvision-exact bicubic resizing: hand-checked
// values, bad files, and the HF/PIL/torchvision fixtures of scripts/media_fixtures/image.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"
#include "media/bicubic_resize.h"
#include "media/image_decode.h"
#include "tests/common/scratch_dir.h"
#include "tests/unit/test_media_image_fixture.h"

using namespace veomni;

namespace {

using veomni::test::kMediaInputs;
using veomni::test::media_file_bytes;

const std::string kImageFixtures = std::string(VEOMNI_FIXTURES_DIR) + "/media/image/";

void write_image_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// The fixture reader, failing the test with the regeneration hint when the file is absent.
bool open_fixture(const std::string& name, std::unique_ptr<SafetensorsReader>& reader) {
  const std::string path = kImageFixtures + name;
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << "missing fixture " << path
                  << " (make it with: python3 scripts/media_fixtures/image.py tests/fixtures/media/inputs "
                     "tests/fixtures/media/image)";
    return false;
  }
  reader = std::make_unique<SafetensorsReader>(path);
  return true;
}

RgbImage image_from_hwc(const Tensor& hwc) {
  EXPECT_EQ(hwc.dtype(), DType::U8);
  EXPECT_EQ(hwc.ndim(), 3);
  RgbImage image{hwc.dim(0), hwc.dim(1), {}};
  const uint8_t* p = hwc.data<uint8_t>();
  image.pixels.assign(p, p + hwc.numel());
  return image;
}

// A grey image whose every row is `row`.
RgbImage grey_rows(const std::vector<uint8_t>& row, int64_t height) {
  RgbImage image{height, static_cast<int64_t>(row.size()), {}};
  for (int64_t y = 0; y < height; ++y)
    for (uint8_t v : row) image.pixels.insert(image.pixels.end(), {v, v, v});
  return image;
}

int max_level_difference(const RgbImage& a, const RgbImage& b) {
  int worst = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) worst = std::max(worst, std::abs(a.pixels[i] - b.pixels[i]));
  return worst;
}

void expect_image_input_error_naming(const std::string& path, const std::string& fragment) {
  try {
    decode_image(path);
    ADD_FAILURE() << path << ": decoded without error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
  }
}

}  // namespace

TEST(MediaImageDecode, PngRgbHasItsSize) {
  const RgbImage image = decode_image(kMediaInputs + "image_rgb_48x64.png");
  EXPECT_EQ(image.height, 48);
  EXPECT_EQ(image.width, 64);
  EXPECT_EQ(image.pixels.size(), 48u * 64u * 3u);
}

TEST(MediaImageDecode, GreyPngIsReplicatedToRgb) {
  const RgbImage image = decode_image(kMediaInputs + "image_grey_33x77.png");
  ASSERT_EQ(image.height, 33);
  ASSERT_EQ(image.width, 77);
  int distinct_levels = 0;
  std::vector<bool> seen(256, false);
  for (size_t i = 0; i < image.pixels.size(); i += 3) {
    EXPECT_EQ(image.pixels[i], image.pixels[i + 1]);
    EXPECT_EQ(image.pixels[i], image.pixels[i + 2]);
    if (!seen[image.pixels[i]]) ++distinct_levels, seen[image.pixels[i]] = true;
  }
  EXPECT_GT(distinct_levels, 50);  // a real picture, not a flat one
}

TEST(MediaImageDecode, OneBitPngBecomesBlackAndWhite) {
  const RgbImage image = decode_image(kMediaInputs + "image_mono_40x50.png");
  ASSERT_EQ(image.height, 40);
  ASSERT_EQ(image.width, 50);
  const auto black = std::count(image.pixels.begin(), image.pixels.end(), 0);
  const auto white = std::count(image.pixels.begin(), image.pixels.end(), 255);
  EXPECT_GT(black, 0);
  EXPECT_GT(white, 0);
  EXPECT_EQ(black + white, static_cast<long>(image.pixels.size()));
}

// make_image_media.sh writes 16-bit grey value 8x + y at (y, x); PIL's I;16 -> RGB clips it at 255.
TEST(MediaImageDecode, SixteenBitGreyPngClipsAt255) {
  const RgbImage image = decode_image(kMediaInputs + "image_grey16_40x50.png");
  ASSERT_EQ(image.height, 40);
  ASSERT_EQ(image.width, 50);
  for (int64_t y = 0; y < image.height; ++y)
    for (int64_t x = 0; x < image.width; ++x)
      for (int64_t c = 0; c < 3; ++c)
        ASSERT_EQ(image.at(y, x, c), std::min<int64_t>(8 * x + y, 255)) << "y " << y << " x " << x;
}

TEST(MediaImageDecode, JpegsDecodeToTheirSize) {
  const RgbImage photo = decode_image(kMediaInputs + "image_photo_100x300.jpg");
  EXPECT_EQ(photo.height, 100);
  EXPECT_EQ(photo.width, 300);
  const RgbImage full_chroma = decode_image(kMediaInputs + "image_444_40x50.jpg");
  EXPECT_EQ(full_chroma.height, 40);
  EXPECT_EQ(full_chroma.width, 50);
}

// Every input against PIL's Image.open(path).convert("RGB"), exactly.
TEST(MediaImageFixtures, DecodeMatchesPilConvertRgb) {
  std::unique_ptr<SafetensorsReader> decoded;
  if (!open_fixture("decoded.safetensors", decoded)) return;
  ASSERT_GE(decoded->entries().size(), 10u);
  for (const SafetensorsEntry& entry : decoded->entries()) {
    SCOPED_TRACE(entry.name);
    const RgbImage expected = image_from_hwc(decoded->read(entry.name));
    const RgbImage ours = decode_image(kMediaInputs + entry.name);
    ASSERT_EQ(ours.height, expected.height);
    ASSERT_EQ(ours.width, expected.width);
    EXPECT_EQ(max_level_difference(ours, expected), 0);
  }
}

class MediaImageFiles : public veomni::testing::ScratchDir {};

TEST_F(MediaImageFiles, FormatComesFromContentNotName) {
  write_image_bytes(path("png_named.jpg"), media_file_bytes(kMediaInputs + "image_rgb_48x64.png"));
  EXPECT_EQ(decode_image(path("png_named.jpg")).pixels, decode_image(kMediaInputs + "image_rgb_48x64.png").pixels);
}

TEST_F(MediaImageFiles, MissingFileNamesThePath) { expect_image_input_error_naming(path("absent.png"), "cannot open"); }

TEST_F(MediaImageFiles, EmptyFileNamesThePath) {
  write_image_bytes(path("empty.png"), {});
  expect_image_input_error_naming(path("empty.png"), "empty");
}

TEST_F(MediaImageFiles, UnknownFormatNamesThePath) {
  const std::string text = "GIF89a is not supported here";
  write_image_bytes(path("picture.gif"), std::vector<uint8_t>(text.begin(), text.end()));
  expect_image_input_error_naming(path("picture.gif"), "not a PNG or JPEG");
}

TEST_F(MediaImageFiles, TruncatedPngNamesThePath) {
  std::vector<uint8_t> bytes = media_file_bytes(kMediaInputs + "image_rgb_48x64.png");
  bytes.resize(bytes.size() / 2);
  write_image_bytes(path("truncated.png"), bytes);
  expect_image_input_error_naming(path("truncated.png"), "truncated");
}

TEST_F(MediaImageFiles, TruncatedPngHeaderNamesThePath) {
  std::vector<uint8_t> bytes = media_file_bytes(kMediaInputs + "image_rgb_48x64.png");
  bytes.resize(20);  // signature and part of IHDR
  write_image_bytes(path("header.png"), bytes);
  expect_image_input_error_naming(path("header.png"), "corrupt PNG header");
}

TEST_F(MediaImageFiles, CorruptPngDataNamesThePath) {
  std::vector<uint8_t> bytes = media_file_bytes(kMediaInputs + "image_rgb_48x64.png");
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; ++i) bytes[i] ^= 0x5a;  // breaks the IDAT CRC
  write_image_bytes(path("corrupt.png"), bytes);
  expect_image_input_error_naming(path("corrupt.png"), "corrupt PNG");
}

TEST_F(MediaImageFiles, TruncatedJpegNamesThePath) {
  std::vector<uint8_t> bytes = media_file_bytes(kMediaInputs + "image_photo_100x300.jpg");
  bytes.resize(bytes.size() / 2);
  write_image_bytes(path("truncated.jpg"), bytes);
  expect_image_input_error_naming(path("truncated.jpg"), "corrupt JPEG");
}

TEST_F(MediaImageFiles, GarbageAfterJpegSignatureNamesThePath) {
  std::vector<uint8_t> bytes = {0xff, 0xd8, 0xff, 0xe0};
  for (int i = 0; i < 200; ++i) bytes.push_back(static_cast<uint8_t>(i * 37));
  write_image_bytes(path("garbage.jpg"), bytes);
  expect_image_input_error_naming(path("garbage.jpg"), "corrupt JPEG");
}

TEST(MediaBicubicResize, SameSizeIsIdentity) {
  const RgbImage image = decode_image(kMediaInputs + "image_rgb_48x64.png");
  EXPECT_EQ(resize_bicubic(image, 48, 64).pixels, image.pixels);
}

TEST(MediaBicubicResize, ConstantImageStaysConstant) {
  const RgbImage flat = grey_rows(std::vector<uint8_t>(37, 201), 23);
  for (auto [h, w] : {std::pair<int64_t, int64_t>{64, 96}, {5, 7}, {1, 1}, {23, 300}, {200, 37}}) {
    const RgbImage resized = resize_bicubic(flat, h, w);
    ASSERT_EQ(resized.height, h);
    ASSERT_EQ(resized.width, w);
    for (uint8_t v : resized.pixels) ASSERT_EQ(v, 201) << h << "x" << w;
  }
}

// Row [0, 255] widened to 4 (scale 1/2, Keys a = -0.5, normalised over the 2 taps inside, int16 weights at 14
// bits): outputs 0 (-22.5 clamped), round(255 * 0.20714) = 53, 255 - 53 = 202 and 255 (277.99 clamped).
TEST(MediaBicubicResize, HandComputedUpsampledEdge) {
  const RgbImage resized = resize_bicubic(grey_rows({0, 255}, 1), 1, 4);
  const std::vector<uint8_t> expected = {0, 0, 0, 53, 53, 53, 202, 202, 202, 255, 255, 255};
  EXPECT_EQ(resized.pixels, expected);
}

TEST(MediaBicubicResize, ResizesEachAxisOnItsOwn) {
  const RgbImage image = decode_image(kMediaInputs + "image_photo_100x300.jpg");
  const RgbImage both = resize_bicubic(image, 64, 192);
  const RgbImage staged = resize_bicubic(resize_bicubic(image, 100, 192), 64, 192);
  EXPECT_EQ(both.pixels, staged.pixels);  // horizontal pass first, rounded to uint8, then vertical
}

// torchvision.transforms.v2.functional.resize(uint8, BICUBIC, antialias=True), as HF's processor calls it.
TEST(MediaImageFixtures, ResizeMatchesTorchvisionExactly) {
  std::unique_ptr<SafetensorsReader> fixture;
  if (!open_fixture("resize.safetensors", fixture)) return;
  const RgbImage input = image_from_hwc(fixture->read("input"));
  int compared = 0;
  for (const SafetensorsEntry& entry : fixture->entries()) {
    if (entry.name == "input") continue;
    SCOPED_TRACE(entry.name);
    const RgbImage expected = image_from_hwc(fixture->read(entry.name));
    const RgbImage ours = resize_bicubic(input, expected.height, expected.width);
    EXPECT_EQ(max_level_difference(ours, expected), 0);
    ++compared;
  }
  EXPECT_GE(compared, 6);
}
