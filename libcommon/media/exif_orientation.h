// Reading the display orientation of a picture from its EXIF block (or, failing that, its XMP packet) the way
// Pillow's Image.getexif() and ImageOps.exif_transpose() read it, without ever trusting an offset in the data.
#pragma once
#include <cstdint>
#include <optional>
#include <span>

namespace veomni {

// The EXIF orientations (tag 0x0112 of IFD0). The stored picture is turned into the displayed one by Pillow's
// transpose ops: 2 FLIP_LEFT_RIGHT, 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE, 6 ROTATE_270 (90 degrees
// clockwise), 7 TRANSVERSE, 8 ROTATE_90 (90 degrees counter-clockwise); 1 and every other value leave it as stored.
inline constexpr int kOrientationNormal = 1;

// What IFD0 of one EXIF block says. `readable` is false where Pillow cannot parse the TIFF header (it raises, and
// transformers' load_image with it); `present` is true when IFD0 holds a loadable tag 0x0112, whatever its value.
struct ExifOrientationTag {
  bool readable = true;
  bool present = false;
  int orientation = kOrientationNormal;  // 2..8 where the tag's first value equals one of them, else 1
};

// `exif`: a TIFF block (either byte order) after any number of "Exif\0\0" prefixes, as Pillow's Exif.load takes
// it. Entries are read in order as Pillow reads them: unknown types and empty values are skipped, a later
// duplicate replaces an earlier one, and a value lying outside the block ends the directory (entries before it
// count). Integer, float and rational types count by value (6, 6.0 and 12/2 are all 6); BYTE, ASCII and UNDEFINED
// values never equal an orientation.
ExifOrientationTag read_exif_orientation(std::span<const uint8_t> exif);

// Pillow's fallback when EXIF has no orientation tag: the digit of the first tiff:Orientation="d" or
// tiff:Orientation>d in the XMP packet; nullopt without one.
std::optional<int> xmp_orientation(std::span<const uint8_t> xmp);

// The orientation exif_transpose applies (1..8) given an image's EXIF block and XMP packet (either may be absent):
// EXIF's tag when present, 1 when the EXIF header is unreadable (Pillow raises there; garbage must not stop
// training), else XMP's digit, else 1.
int picture_orientation(const std::optional<std::span<const uint8_t>>& exif,
                        const std::optional<std::span<const uint8_t>>& xmp);

}  // namespace veomni
