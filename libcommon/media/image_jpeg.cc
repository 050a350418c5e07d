// JPEG decoding with libjpeg(-turbo) using PIL's settings (accurate integer IDCT, fancy upsampling, libjpeg's own
// YCbCr -> RGB), so that our pixels equal Image.open(path).convert("RGB").
#include <cstdio>  // jpeglib.h uses FILE and size_t without including their headers

#include <jerror.h>
#include <jpeglib.h>

#include <csetjmp>

#include "core/error.h"
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

// Reads the header and starts decompression to RGB; colour_supported is false for CMYK/YCCK files (PIL converts
// those with its own CMYK formula, which we do not reproduce). False with the message set when libjpeg fails; no
// C++ object with a destructor lives in here.
bool start_jpeg(JpegDecompressor* jpeg, const std::vector<uint8_t>* bytes, bool* colour_supported) {
  if (setjmp(jpeg->errors.jump)) return false;
  jpeg_create_decompress(&jpeg->cinfo);
  jpeg->created = true;
  jpeg_mem_src(&jpeg->cinfo, bytes->data(), static_cast<unsigned long>(bytes->size()));
  jpeg_read_header(&jpeg->cinfo, TRUE);
  const J_COLOR_SPACE space = jpeg->cinfo.jpeg_color_space;
  *colour_supported = space != JCS_CMYK && space != JCS_YCCK;
  if (!*colour_supported) return true;
  jpeg->cinfo.out_color_space = JCS_RGB;  // grey is replicated, YCbCr converted by libjpeg as PIL has it do
  jpeg->cinfo.dct_method = JDCT_ISLOW;
  jpeg->cinfo.do_fancy_upsampling = TRUE;
  jpeg_start_decompress(&jpeg->cinfo);
  return true;
}

bool read_jpeg_rows(JpegDecompressor* jpeg, uint8_t* pixels) {
  if (setjmp(jpeg->errors.jump)) return false;
  const size_t row_bytes = static_cast<size_t>(jpeg->cinfo.output_width) * 3;
  while (jpeg->cinfo.output_scanline < jpeg->cinfo.output_height) {
    JSAMPROW row = pixels + jpeg->cinfo.output_scanline * row_bytes;
    jpeg_read_scanlines(&jpeg->cinfo, &row, 1);
  }
  return true;
}

}  // namespace

RgbImage decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& source) {
  JpegDecompressor jpeg;
  bool colour_supported = true;
  VEOMNI_INPUT_CHECK(start_jpeg(&jpeg, &bytes, &colour_supported), "{}: corrupt JPEG: {}", source, jpeg.errors.message);
  VEOMNI_INPUT_CHECK(colour_supported, "{}: CMYK/YCCK JPEG images are not supported (convert it to RGB first)", source);
  RgbImage image;
  image.height = jpeg.cinfo.output_height;
  image.width = jpeg.cinfo.output_width;
  check_image_size(image.height, image.width, source);
  VEOMNI_CHECK(jpeg.cinfo.output_components == 3, "{}: libjpeg produced {} components for RGB output", source,
               jpeg.cinfo.output_components);
  image.pixels.resize(static_cast<size_t>(image.height * image.width * 3));
  VEOMNI_INPUT_CHECK(read_jpeg_rows(&jpeg, image.pixels.data()), "{}: corrupt JPEG image data: {}", source,
                     jpeg.errors.message);
  return image;
}

}  // namespace veomni::detail
