// Decoding PNG and JPEG files into RGB the way transformers' load_image does (PIL's Image.open, ImageOps.exif_transpose,
// convert("RGB")).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "media/image_rgb.h"

namespace veomni {

// Picks the format from the file's signature, not its name. Grey, grey+alpha, palette and alpha images become RGB
// as PIL converts them (alpha dropped, grey replicated, palette looked up); 16-bit colour keeps the high byte and
// 16-bit grey clips to 255 (PIL's I;16 -> RGB); CMYK and YCCK JPEGs convert with PIL's inverted-CMYK rule
// (cmyk_to_rgb.h). The picture is then turned to its displayed orientation (exif_orientation.h): the EXIF block of
// a JPEG's APP1 "Exif" segments (concatenated, as Pillow does) or of a PNG's last eXIf chunk (or tEXt "exif"), else
// a JPEG's XMP tiff:Orientation; a malformed block means no turn. Missing, empty, corrupt, truncated or
// unsupported files (other formats) are InputErrors naming the path.
RgbImage decode_image(const std::string& path);

// The same from bytes already in memory; `source` names them in errors.
RgbImage decode_image_bytes(const std::vector<uint8_t>& bytes, const std::string& source);

}  // namespace veomni
