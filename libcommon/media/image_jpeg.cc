// JPEG decoding with libjpeg(-turbo) using PIL's settings (accurate integer IDCT, fancy upsampling, libjpeg's own
// YCbCr -> RGB, CMYK/YCCK as inverted CMYK), so that our pixels equal Image.open(path).convert("RGB"), plus the EXIF
// and XMP segments that say how to display them.
#include <cstdio>  // jpeglib.h uses FILE and size_t without including their headers

#include <jerror.h>
#include <jpeglib.h>

#include <csetjmp>
#include <cstring>
#include <string_view>

#include "core/error.h"
#include "media/cmyk_to_rgb.h"
#include "media/image_codecs.h"

namespace veomni::detail {
namespace {

// libjpeg reaches this through cinfo->err, so the library's struct comes first.
struct JpegErrorManager {
  jpeg_error_mgr base;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = "unknown libjpeg error";
};

// Must not return: records the message and jumps back to the setjmp of the decoding step in progress.
[[noreturn]] void on_jpeg_error(j_common_ptr cinfo) {
  auto* manager = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, manager->message);
  std::longjmp(manager->jump, 1);
}

// libjpeg pads a truncated file with grey and only warns; PIL raises "image file is truncated", and so do we.
// Other warnings (extraneous bytes, ...) PIL decodes through, and so do we.
void on_jpeg_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) on_jpeg_error(cinfo);
}

// Owns one libjpeg decompressor and its error manager.
struct JpegDecompressor {
  jpeg_decompress_struct cinfo{};
  JpegErrorManager errors{};
  bool created = false;

  JpegDecompressor() {
    cinfo.err = jpeg_std_error(&errors.base);
    errors.base.error_exit = on_jpeg_error;
    errors.base.emit_message = on_jpeg_message;
  }
  ~JpegDecompressor() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
  JpegDecompressor(const JpegDecompressor&) = delete;
  JpegDecompressor& operator=(const JpegDecompressor&) = delete;
};

// Reads the markers up to the first scan, as PIL does, keeping the APP1 segments (where EXIF and XMP live). False
// with the message set when libjpeg fails; no C++ object with a destructor lives in here (nor in start_jpeg).
bool read_jpeg_header(JpegDecompressor* jpeg, const std::vector<uint8_t>* bytes) {
  if (setjmp(jpeg->errors.jump)) return false;
  jpeg_create_decompress(&jpeg->cinfo);
  jpeg->created = true;
  jpeg_mem_src(&jpeg->cinfo, bytes->data(), static_cast<unsigned long>(bytes->size()));
  jpeg_save_markers(&jpeg->cinfo, JPEG_APP0 + 1, 0xffff);
  jpeg_read_header(&jpeg->cinfo, TRUE);
  return true;
}

// Starts decompression to RGB, or to CMYK for 4-channel files (libjpeg turns YCCK into CMYK; PIL asks it for CMYK
// too).
bool start_jpeg(JpegDecompressor* jpeg) {
  if (setjmp(jpeg->errors.jump)) return false;
  const J_COLOR_SPACE space = jpeg->cinfo.jpeg_color_space;
  const bool four_channel = space == JCS_CMYK || space == JCS_YCCK;
  // Grey is replicated and YCbCr converted by libjpeg, as PIL has it do.
  jpeg->cinfo.out_color_space = four_channel ? JCS_CMYK : JCS_RGB;
  jpeg->cinfo.dct_method = JDCT_ISLOW;
  jpeg->cinfo.do_fancy_upsampling = TRUE;
  jpeg_start_decompress(&jpeg->cinfo);
  return true;
}

// Rows of output_components samples per pixel into `samples`.
bool read_jpeg_rows(JpegDecompressor* jpeg, uint8_t* samples) {
  if (setjmp(jpeg->errors.jump)) return false;
  const size_t row_bytes = static_cast<size_t>(jpeg->cinfo.output_width) * jpeg->cinfo.output_components;
  while (jpeg->cinfo.output_scanline < jpeg->cinfo.output_height) {
    JSAMPROW row = samples + jpeg->cinfo.output_scanline * row_bytes;
    jpeg_read_scanlines(&jpeg->cinfo, &row, 1);
  }
  return true;
}

bool starts_with(const jpeg_saved_marker_ptr marker, std::string_view prefix) {
  return marker->data_length >= prefix.size() && std::memcmp(marker->data, prefix.data(), prefix.size()) == 0;
}

// Pillow's JPEG plugin: the first APP1 "Exif\0\0" segment whole, each later one appended without its 6-byte
// prefix; the XMP packet is what follows the namespace of the last APP1 XMP segment.
void collect_metadata(const jpeg_decompress_struct& cinfo, DecodedPicture* picture) {
  constexpr std::string_view kExif("Exif\0\0", 6);
  constexpr std::string_view kXmp("http://ns.adobe.com/xap/1.0/\0", 29);
  for (jpeg_saved_marker_ptr m = cinfo.marker_list; m != nullptr; m = m->next) {
    if (m->marker != JPEG_APP0 + 1) continue;
    const uint8_t* begin = m->data;
    const uint8_t* end = begin + m->data_length;
    if (starts_with(m, kExif)) {
      if (!picture->exif) picture->exif.emplace(begin, end);
      else picture->exif->insert(picture->exif->end(), begin + kExif.size(), end);
    } else if (starts_with(m, kXmp)) {
      picture->xmp.emplace(begin + kXmp.size(), end);
    }
  }
}

}  // namespace

DecodedPicture decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& source) {
  JpegDecompressor jpeg;
  VEOMNI_INPUT_CHECK(read_jpeg_header(&jpeg, &bytes), "{}: corrupt JPEG: {}", source, jpeg.errors.message);
  DecodedPicture picture;
  collect_metadata(jpeg.cinfo, &picture);  // before the scans: a progressive file is read whole when it starts
  VEOMNI_INPUT_CHECK(start_jpeg(&jpeg), "{}: corrupt JPEG: {}", source, jpeg.errors.message);
  RgbImage& image = picture.stored;
  image.height = jpeg.cinfo.output_height;
  image.width = jpeg.cinfo.output_width;
  check_image_size(image.height, image.width, source);
  const bool cmyk = jpeg.cinfo.out_color_space == JCS_CMYK;
  const int components = jpeg.cinfo.output_components;
  VEOMNI_CHECK(components == (cmyk ? 4 : 3), "{}: libjpeg produced {} components for {} output", source, components,
               cmyk ? "CMYK" : "RGB");
  const size_t pixels = static_cast<size_t>(image.height * image.width);
  image.pixels.resize(pixels * 3);
  std::vector<uint8_t> cmyk_samples(cmyk ? pixels * 4 : 0);
  VEOMNI_INPUT_CHECK(read_jpeg_rows(&jpeg, cmyk ? cmyk_samples.data() : image.pixels.data()),
                     "{}: corrupt JPEG image data: {}", source, jpeg.errors.message);
  if (cmyk) inverted_cmyk_to_rgb(cmyk_samples.data(), image.pixels.data(), pixels);
  return picture;
}

}  // namespace veomni::detail
