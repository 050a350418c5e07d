// EXIF IFD0 / XMP orientation parsing with Pillow's rules (TiffImagePlugin.ImageFileDirectory_v2.load and
// Image.getexif); every read is bounds-checked against the block.
#include "media/exif_orientation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

namespace veomni {
namespace {

constexpr uint16_t kOrientationTag = 0x0112;
constexpr std::string_view kExifPrefix("Exif\0\0", 6);

// TIFF field types Pillow can load, by their size in bytes; 0 for types it skips.
size_t tiff_type_size(uint16_t type) {
  switch (type) {
    case 1: case 2: case 6: case 7: return 1;  // BYTE, ASCII, SBYTE, UNDEFINED
    case 3: case 8: return 2;                  // SHORT, SSHORT
    case 4: case 9: case 11: case 13: return 4;  // LONG, SLONG, FLOAT, IFD
    case 5: case 10: case 12: case 16: return 8;  // RATIONAL, SRATIONAL, DOUBLE, LONG8
    default: return 0;
  }
}

// A TIFF block in one byte order; all reads are checked by the caller against size().
class TiffReader {
 public:
  TiffReader(std::span<const uint8_t> data, bool big_endian) : data_(data), big_endian_(big_endian) {}
  size_t size() const { return data_.size(); }
  bool fits(uint64_t offset, uint64_t length) const { return offset <= size() && length <= size() - offset; }
  uint64_t unsigned_at(size_t offset, int bytes) const {
    uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) {
      const uint8_t byte = data_[offset + static_cast<size_t>(big_endian_ ? i : bytes - 1 - i)];
      value = (value << 8) | byte;
    }
    return value;
  }

 private:
  std::span<const uint8_t> data_;
  bool big_endian_;
};

// The first value of an orientation entry as a number Pillow's dict lookup would compare with 2..8; NaN for the
// types whose values never compare equal to an integer (BYTE gives bytes, ASCII a str, UNDEFINED bytes).
double first_value(const TiffReader& tiff, size_t at, uint16_t type) {
  const auto u = [&](int bytes) { return tiff.unsigned_at(at, bytes); };
  switch (type) {
    case 3: return static_cast<double>(u(2));
    case 4: case 13: return static_cast<double>(u(4));
    case 16: return static_cast<double>(u(8));
    case 6: return static_cast<int8_t>(u(1));
    case 8: return static_cast<int16_t>(u(2));
    case 9: return static_cast<int32_t>(u(4));
    case 11: {
      const auto bits = static_cast<uint32_t>(u(4));
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return f;
    }
    case 12: {
      const uint64_t bits = u(8);
      double d;
      std::memcpy(&d, &bits, sizeof d);
      return d;
    }
    case 5: case 10: {  // a fraction equals an integer only when it divides exactly; x/0 is NaN in Pillow
      const uint64_t num_bits = u(4), den_bits = tiff.unsigned_at(at + 4, 4);
      const int64_t num = type == 5 ? static_cast<int64_t>(num_bits) : static_cast<int32_t>(num_bits);
      const int64_t den = type == 5 ? static_cast<int64_t>(den_bits) : static_cast<int32_t>(den_bits);
      if (den == 0 || num % den != 0) return NAN;
      return static_cast<double>(num / den);
    }
    default: return NAN;
  }
}

int as_orientation(double value) {
  for (int k = 2; k <= 8; ++k)
    if (value == k) return k;
  return kOrientationNormal;
}

std::span<const uint8_t> without_exif_prefixes(std::span<const uint8_t> data) {
  while (data.size() >= kExifPrefix.size() && std::memcmp(data.data(), kExifPrefix.data(), kExifPrefix.size()) == 0)
    data = data.subspan(kExifPrefix.size());
  return data;
}

// Pillow accepts the two valid classic TIFF headers and the two with a swapped magic number; BigTIFF headers are
// accepted too but then fail (Exif.load reads only 8 header bytes), like anything else shorter or different.
std::optional<bool> header_big_endian(std::span<const uint8_t> tiff) {
  if (tiff.size() < 8) return std::nullopt;
  const bool intel = tiff[0] == 'I' && tiff[1] == 'I', motorola = tiff[0] == 'M' && tiff[1] == 'M';
  const bool magic = (tiff[2] == 0x2a && tiff[3] == 0) || (tiff[2] == 0 && tiff[3] == 0x2a);
  if (!(intel || motorola) || !magic) return std::nullopt;
  return motorola;
}

}  // namespace

ExifOrientationTag read_exif_orientation(std::span<const uint8_t> exif) {
  ExifOrientationTag result;
  const std::span<const uint8_t> data = without_exif_prefixes(exif);
  if (data.empty()) return result;  // Pillow: no EXIF at all
  const std::optional<bool> big_endian = header_big_endian(data);
  if (!big_endian) {
    result.readable = false;
    return result;
  }
  const TiffReader tiff(data, *big_endian);
  const uint64_t ifd = tiff.unsigned_at(4, 4);
  if (!tiff.fits(ifd, 2)) return result;  // Pillow warns "Corrupt EXIF data" and keeps no entries
  const uint64_t count = tiff.unsigned_at(ifd, 2);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t entry = ifd + 2 + 12 * i;
    if (!tiff.fits(entry, 12)) break;  // a truncated directory keeps the entries before
    const auto tag = static_cast<uint16_t>(tiff.unsigned_at(entry, 2));
    const auto type = static_cast<uint16_t>(tiff.unsigned_at(entry + 2, 2));
    const uint64_t values = tiff.unsigned_at(entry + 4, 4);
    const size_t unit = tiff_type_size(type);
    if (unit == 0) continue;
    const uint64_t length = values * unit;
    uint64_t at = entry + 8;  // values of up to 4 bytes sit in the entry itself
    if (length > 4) {
      at = tiff.unsigned_at(entry + 8, 4);
      if (!tiff.fits(at, length)) break;  // Pillow's read past the end raises and ends the directory
    }
    if (length == 0 || tag != kOrientationTag) continue;
    result.present = true;
    result.orientation = as_orientation(first_value(tiff, static_cast<size_t>(at), type));
  }
  return result;
}

std::optional<int> xmp_orientation(std::span<const uint8_t> xmp) {
  constexpr std::string_view kKey = "tiff:Orientation";
  const std::string_view text(reinterpret_cast<const char*>(xmp.data()), xmp.size());
  for (size_t at = text.find(kKey); at != std::string_view::npos; at = text.find(kKey, at + 1)) {
    const std::string_view rest = text.substr(at + kKey.size());
    size_t digit = std::string_view::npos;
    if (rest.starts_with("=\"")) digit = 2;
    if (rest.starts_with('>')) digit = 1;
    if (digit != std::string_view::npos && digit < rest.size() && rest[digit] >= '0' && rest[digit] <= '9')
      return rest[digit] - '0';
  }
  return std::nullopt;
}

int picture_orientation(const std::optional<std::span<const uint8_t>>& exif,
                        const std::optional<std::span<const uint8_t>>& xmp) {
  if (exif) {
    const ExifOrientationTag tag = read_exif_orientation(*exif);
    if (!tag.readable) return kOrientationNormal;
    if (tag.present) return tag.orientation;
  }
  if (xmp) {
    if (const std::optional<int> digit = xmp_orientation(*xmp)) return as_orientation(*digit);
  }
  return kOrientationNormal;
}

}  // namespace veomni
