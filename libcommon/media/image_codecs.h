// The per-format image decoders behind decode_image (internal to libveomni_media).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "media/image_rgb.h"

namespace veomni::detail {

bool is_png(const std::vector<uint8_t>& bytes);
bool is_jpeg(const std::vector<uint8_t>& bytes);

// A decoded picture as stored (before its orientation is applied) with the metadata that says how to display it,
// gathered as Pillow gathers info["exif"] and info["xmp"].
struct DecodedPicture {
  RgbImage stored;
  std::optional<std::vector<uint8_t>> exif;
  std::optional<std::vector<uint8_t>> xmp;
};

// Both throw InputError naming `source` on corrupt, truncated or unsupported data.
DecodedPicture decode_png(const std::vector<uint8_t>& bytes, const std::string& source);
DecodedPicture decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& source);

// Refuses sizes PIL refuses as decompression bombs (more than 2 x 89,478,485 pixels) and empty images.
void check_image_size(int64_t height, int64_t width, const std::string& source);

}  // namespace veomni::detail
