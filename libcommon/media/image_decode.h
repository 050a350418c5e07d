// Decoding PNG and JPEG files into RGB the way PIL's Image.open(path).convert("RGB") does (VeOmni's image loader).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "media/image_rgb.h"

namespace veomni {

// Picks the format from the file's signature, not its name. Grey, grey+alpha, palette and alpha images become RGB
// as PIL converts them (alpha dropped, grey replicated, palette looked up); 16-bit colour keeps the high byte and
// 16-bit grey clips to 255 (PIL's I;16 -> RGB). Missing, empty, corrupt, truncated or unsupported files (CMYK JPEG,
// other formats) are InputErrors naming the path.
RgbImage decode_image(const std::string& path);

// The same from bytes already in memory; `source` names them in errors.
RgbImage decode_image_bytes(const std::vector<uint8_t>& bytes, const std::string& source);

}  // namespace veomni
