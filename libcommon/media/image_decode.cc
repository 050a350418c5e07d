// Dispatch from file content to the PNG or JPEG decoder, then the picture turned to its EXIF orientation.
#include "media/image_decode.h"

#include <algorithm>
#include <span>

#include "core/error.h"
#include "media/exif_orientation.h"
#include "media/image_codecs.h"
#include "media/image_orientation.h"
#include "media/media_file.h"

namespace veomni {

namespace detail {

bool is_png(const std::vector<uint8_t>& bytes) {
  static constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return bytes.size() >= 8 && std::equal(kSignature, kSignature + 8, bytes.begin());
}

bool is_jpeg(const std::vector<uint8_t>& bytes) {
  return bytes.size() >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff;
}

void check_image_size(int64_t height, int64_t width, const std::string& source) {
  // PIL's Image.MAX_IMAGE_PIXELS is 89,478,485; it raises DecompressionBombError above twice that.
  constexpr int64_t kMaxPixels = 2 * 89478485LL;
  VEOMNI_INPUT_CHECK(height > 0 && width > 0, "{}: image has no pixels ({}x{})", source, height, width);
  VEOMNI_INPUT_CHECK(height * width <= kMaxPixels, "{}: image of {}x{} pixels exceeds the {}-pixel limit", source,
                     height, width, kMaxPixels);
}

}  // namespace detail

namespace {

std::optional<std::span<const uint8_t>> view(const std::optional<std::vector<uint8_t>>& bytes) {
  if (!bytes) return std::nullopt;
  return std::span<const uint8_t>(*bytes);
}

detail::DecodedPicture decode_stored(const std::vector<uint8_t>& bytes, const std::string& source) {
  if (detail::is_png(bytes)) return detail::decode_png(bytes, source);
  if (detail::is_jpeg(bytes)) return detail::decode_jpeg(bytes, source);
  throw InputError(
      fmt::format("{}: not a PNG or JPEG image (unrecognised signature; other formats are not "
                  "supported: convert the file to PNG)",
                  source));
}

}  // namespace

RgbImage decode_image_bytes(const std::vector<uint8_t>& bytes, const std::string& source) {
  detail::DecodedPicture picture = decode_stored(bytes, source);
  return apply_orientation(std::move(picture.stored), picture_orientation(view(picture.exif), view(picture.xmp)));
}

RgbImage decode_image(const std::string& path) { return decode_image_bytes(read_media_file(path), path); }

}  // namespace veomni
