// PNG decoding with libpng, turning every colour type and bit depth into 8-bit RGB as PIL's convert("RGB") does,
// plus the EXIF block PIL finds in the file's chunks.
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "core/error.h"
#include "media/image_codecs.h"

namespace veomni::detail {
namespace {

struct PngSource {
  const uint8_t* data = nullptr;
  size_t size = 0;
  size_t offset = 0;
};

struct PngErrorState {
  char message[256] = "unknown libpng error";
};

struct PngLayout {
  int64_t height = 0, width = 0;
  int channels = 0;   // after expansion: 1 grey, 2 grey+alpha, 3 RGB, 4 RGBA
  int bit_depth = 0;  // 8 or 16
  size_t row_bytes = 0;
};

// libpng reports errors through this callback, which must not return: it records the message and jumps back to
// the setjmp of the read step in progress (the only way out of libpng that its C code supports).
[[noreturn]] void on_png_error(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngErrorState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof(state->message), "%s", message);
  png_longjmp(png, 1);
}

// PIL decodes what libpng only warns about (bad ancillary chunks, unknown profiles), so warnings are dropped.
void on_png_warning(png_structp, png_const_charp) {}

void read_png_bytes(png_structp png, png_bytep out, png_size_t length) {
  auto* source = static_cast<PngSource*>(png_get_io_ptr(png));
  if (length > source->size - source->offset) png_error(png, "file is truncated");
  std::memcpy(out, source->data + source->offset, length);
  source->offset += length;
}

// Owns the libpng read and info structs.
class PngHandles {
 public:
  explicit PngHandles(PngErrorState* errors) {
    png_ = png_create_read_struct(PNG_LIBPNG_VER_STRING, errors, on_png_error, on_png_warning);
    if (png_ != nullptr) info_ = png_create_info_struct(png_);
  }
  ~PngHandles() {
    if (png_ != nullptr) png_destroy_read_struct(&png_, info_ != nullptr ? &info_ : nullptr, nullptr);
  }
  PngHandles(const PngHandles&) = delete;
  PngHandles& operator=(const PngHandles&) = delete;

  bool ok() const { return png_ != nullptr && info_ != nullptr; }
  png_structp png() const { return png_; }
  png_infop info() const { return info_; }

 private:
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
};

// Reads the header and asks libpng for palette and low-bit-grey expansion only: alpha and tRNS stay as they are
// (dropped below) and 16-bit samples stay 16-bit (PIL treats 16-bit grey differently from 16-bit colour).
// Returns false with the error state filled when libpng fails; no C++ object with a destructor lives in here.
bool read_png_header(png_structp png, png_infop info, PngSource* source, PngLayout* layout) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_read_fn(png, source, read_png_bytes);
  png_read_info(png, info);
  const int color_type = png_get_color_type(png, info);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color_type == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8) png_set_expand_gray_1_2_4_to_8(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  layout->height = png_get_image_height(png, info);
  layout->width = png_get_image_width(png, info);
  layout->channels = png_get_channels(png, info);
  layout->bit_depth = png_get_bit_depth(png, info);
  layout->row_bytes = png_get_rowbytes(png, info);
  return true;
}

bool read_png_rows(png_structp png, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  return true;
}

// One decoded sample as PIL's 8-bit conversion sees it: 16-bit colour and grey+alpha keep the high byte (PIL's
// ";16B" raw modes); plain 16-bit grey is PIL's I;16 mode, whose conversion to RGB clips to 255.
uint8_t sample_as_u8(const uint8_t* row, int64_t index, const PngLayout& layout) {
  if (layout.bit_depth == 8) return row[index];
  const uint8_t high = row[2 * index];
  if (layout.channels != 1) return high;
  const int value = (high << 8) | row[2 * index + 1];
  return static_cast<uint8_t>(std::min(value, 255));
}

RgbImage png_rows_to_rgb(const std::vector<uint8_t>& raw, const PngLayout& layout) {
  RgbImage image;
  image.height = layout.height;
  image.width = layout.width;
  image.pixels.resize(static_cast<size_t>(layout.height * layout.width * 3));
  const bool grey = layout.channels < 3;
  uint8_t* out = image.pixels.data();
  for (int64_t y = 0; y < layout.height; ++y) {
    const uint8_t* row = raw.data() + static_cast<size_t>(y) * layout.row_bytes;
    for (int64_t x = 0; x < layout.width; ++x, out += 3) {
      const int64_t first = x * layout.channels;
      for (int c = 0; c < 3; ++c) out[c] = sample_as_u8(row, first + (grey ? 0 : c), layout);
    }
  }
  return image;
}

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// PIL's PNG plugin sets info["exif"] from each eXIf chunk (its data behind an "Exif\0\0" prefix) and from each
// tEXt chunk with the keyword "exif" (its raw text), before or after the image data; the last one wins. The walk
// stops at IEND or at a chunk running past the end of the file.
std::optional<std::vector<uint8_t>> png_exif_block(const std::vector<uint8_t>& bytes) {
  constexpr std::string_view kTextKey("exif\0", 5);
  std::optional<std::vector<uint8_t>> exif;
  size_t at = 8;  // after the signature
  while (bytes.size() - at >= 12) {
    const uint64_t length = big_endian_u32(&bytes[at]);
    const std::string_view type(reinterpret_cast<const char*>(&bytes[at + 4]), 4);
    if (length > bytes.size() - at - 12 || type == "IEND") break;
    const uint8_t* data = &bytes[at + 8];
    if (type == "eXIf") {
      exif.emplace(data, data + length);  // PIL's added prefix is stripped again when the block is read
    } else if (type == "tEXt" && length >= kTextKey.size() && std::memcmp(data, kTextKey.data(), kTextKey.size()) == 0) {
      exif.emplace(data + kTextKey.size(), data + length);
    }
    at += 12 + static_cast<size_t>(length);
  }
  return exif;
}

}  // namespace

DecodedPicture decode_png(const std::vector<uint8_t>& bytes, const std::string& source) {
  PngErrorState errors;
  PngHandles handles(&errors);
  VEOMNI_CHECK(handles.ok(), "libpng could not allocate its read structures");
  PngSource input{bytes.data(), bytes.size(), 0};
  PngLayout layout;
  VEOMNI_INPUT_CHECK(read_png_header(handles.png(), handles.info(), &input, &layout), "{}: corrupt PNG header: {}",
                     source, errors.message);
  check_image_size(layout.height, layout.width, source);
  VEOMNI_CHECK(layout.bit_depth == 8 || layout.bit_depth == 16, "{}: libpng left {}-bit samples", source,
               layout.bit_depth);
  std::vector<uint8_t> raw(layout.row_bytes * static_cast<size_t>(layout.height));
  std::vector<png_bytep> rows(static_cast<size_t>(layout.height));
  for (size_t y = 0; y < rows.size(); ++y) rows[y] = raw.data() + y * layout.row_bytes;
  VEOMNI_INPUT_CHECK(read_png_rows(handles.png(), rows.data()), "{}: corrupt PNG image data: {}", source,
                     errors.message);
  return {png_rows_to_rgb(raw, layout), png_exif_block(bytes), std::nullopt};
}

}  // namespace veomni::detail
