// Test support: writes the EXIF-orientation, XMP-orientation, CMYK and YCCK test images of
// tests/fixtures/media/inputs/ with libjpeg and libpng (usage: make_exif_cmyk_images OUT_DIR).
//
// Every orientation file stores the same displayed picture (40 rows x 64 columns of flat 8x8 blocks, each block its
// own colour, so JPEG keeps it exactly) turned the way a camera would store it: what the EXIF orientation tells a
// reader to undo. Names give the displayed height x width.
#include <cstdio>  // jpeglib.h uses FILE and size_t without including their headers

#include <jpeglib.h>
#include <png.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr int kHeight = 40, kWidth = 64, kBlock = 8;

struct Picture {
  int height, width, channels;
  std::vector<uint8_t> samples;  // row-major, `channels` per pixel
  uint8_t* at(int y, int x) { return &samples[static_cast<size_t>((y * width + x) * channels)]; }
  const uint8_t* at(int y, int x) const { return &samples[static_cast<size_t>((y * width + x) * channels)]; }
};

// The displayed picture: block (row r, column c) has colour (32c + 16, 48r + 24, 255 - 28c - 9r), so no two
// blocks match and no flip or turn maps the picture onto itself.
Picture displayed_rgb() {
  Picture p{kHeight, kWidth, 3, std::vector<uint8_t>(kHeight * kWidth * 3)};
  for (int y = 0; y < kHeight; ++y)
    for (int x = 0; x < kWidth; ++x) {
      const int r = y / kBlock, c = x / kBlock;
      uint8_t* px = p.at(y, x);
      px[0] = static_cast<uint8_t>(32 * c + 16);
      px[1] = static_cast<uint8_t>(48 * r + 24);
      px[2] = static_cast<uint8_t>(255 - 28 * c - 9 * r);
    }
  return p;
}

// The stored picture whose EXIF `orientation` displays as `shown`: stored pixel (sy, sx) for each displayed (y, x),
// from the EXIF 2.3 definitions (1: row 0 is the top and column 0 the left; 2: column 0 is the right; 3: row 0 is
// the bottom, column 0 the right; 4: row 0 the bottom; 5: row 0 is the left side, column 0 the top; 6: row 0 is the
// right side, column 0 the top; 7: row 0 the right side, column 0 the bottom; 8: row 0 the left side, column 0 the
// bottom).
Picture stored_for(const Picture& shown, int orientation) {
  const bool swapped = orientation >= 5;
  Picture s{swapped ? shown.width : shown.height, swapped ? shown.height : shown.width, shown.channels,
            std::vector<uint8_t>(shown.samples.size())};
  const int H = shown.height, W = shown.width;
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      int sy = y, sx = x;
      switch (orientation) {
        case 2: sx = W - 1 - x; break;
        case 3: sy = H - 1 - y; sx = W - 1 - x; break;
        case 4: sy = H - 1 - y; break;
        case 5: sy = x; sx = y; break;
        case 6: sy = W - 1 - x; sx = y; break;
        case 7: sy = W - 1 - x; sx = H - 1 - y; break;
        case 8: sy = x; sx = H - 1 - y; break;
        default: break;
      }
      const uint8_t* from = shown.at(y, x);
      uint8_t* to = s.at(sy, sx);
      for (int c = 0; c < shown.channels; ++c) to[c] = from[c];
    }
  return s;
}

// ---- EXIF blocks -----------------------------------------------------------------------------------------------

class TiffWriter {
 public:
  explicit TiffWriter(bool big_endian) : big_(big_endian) {}
  void u16(uint32_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void bytes(const std::string& s) { out_.insert(out_.end(), s.begin(), s.end()); }
  size_t size() const { return out_.size(); }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  void put(uint32_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * (big_ ? n - 1 - i : i))));
  }
  bool big_;
  std::vector<uint8_t> out_;
};

// "Exif\0\0" + a TIFF header + IFD0 as cameras write it: Make (ASCII, stored after the directory), Orientation
// (SHORT), XResolution (RATIONAL 72/1, after the directory), ResolutionUnit (SHORT 2), no next IFD.
// `make_offset_override` (non-zero) points Make outside the block: Pillow then stops reading the directory there.
std::vector<uint8_t> exif_block(int orientation, bool big_endian, uint32_t make_offset_override = 0) {
  TiffWriter w(big_endian);
  w.bytes(std::string("Exif\0\0", 6));  // offsets below count from the TIFF header after it
  w.bytes(big_endian ? "MM" : "II");
  w.u16(42);
  w.u32(8);
  constexpr uint32_t kEntries = 4, kDirectoryEnd = 8 + 2 + 12 * kEntries + 4;
  const std::string make = "veomni";  // 7 bytes with its NUL
  const uint32_t make_at = make_offset_override != 0 ? make_offset_override : kDirectoryEnd;
  const uint32_t resolution_at = kDirectoryEnd + 8;
  w.u16(kEntries);
  w.u16(0x010f), w.u16(2), w.u32(static_cast<uint32_t>(make.size() + 1)), w.u32(make_at);
  w.u16(0x0112), w.u16(3), w.u32(1), w.u16(static_cast<uint32_t>(orientation)), w.u16(0);
  w.u16(0x011a), w.u16(5), w.u32(1), w.u32(resolution_at);
  w.u16(0x0128), w.u16(3), w.u32(1), w.u16(2), w.u16(0);
  w.u32(0);
  w.bytes(make), w.bytes(std::string(1, '\0')), w.bytes(std::string(1, '\0'));  // Make, padded to 8 bytes
  w.u32(72), w.u32(1);
  return w.take();
}

std::vector<uint8_t> xmp_packet(int orientation) {
  const std::string text =
      std::string("http://ns.adobe.com/xap/1.0/") + '\0' +
      "<?xpacket begin=\"\" id=\"W5M0MpCehiHzreSzNTczkc9d\"?><x:xmpmeta xmlns:x=\"adobe:ns:meta/\"><rdf:RDF "
      "xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\"><rdf:Description rdf:about=\"\" "
      "xmlns:tiff=\"http://ns.adobe.com/tiff/1.0/\" tiff:Orientation=\"" +
      std::to_string(orientation) + "\"/></rdf:RDF></x:xmpmeta><?xpacket end=\"w\"?>";
  return {text.begin(), text.end()};
}

// ---- writers ---------------------------------------------------------------------------------------------------

struct Marker {
  int code;
  std::vector<uint8_t> data;
};

// Baseline JPEG at quality 100 with no chroma subsampling (flat 8x8 blocks survive exactly). `space` is JCS_RGB
// (written as YCbCr), JCS_CMYK or JCS_YCCK (both from CMYK samples); `adobe` controls libjpeg's Adobe APP14
// marker (on by default for CMYK and YCCK).
void write_jpeg(const std::string& path, const Picture& p, J_COLOR_SPACE space, bool adobe,
                const std::vector<Marker>& markers) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) std::perror(path.c_str()), std::exit(1);
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr errors{};
  cinfo.err = jpeg_std_error(&errors);  // libjpeg's default handler exits on error
  jpeg_create_compress(&cinfo);
  jpeg_stdio_dest(&cinfo, file);
  cinfo.image_width = static_cast<JDIMENSION>(p.width);
  cinfo.image_height = static_cast<JDIMENSION>(p.height);
  cinfo.input_components = p.channels;
  cinfo.in_color_space = p.channels == 4 ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_colorspace(&cinfo, space == JCS_RGB ? JCS_YCbCr : space);
  cinfo.write_Adobe_marker = adobe ? TRUE : FALSE;
  jpeg_set_quality(&cinfo, 100, TRUE);
  for (int i = 0; i < cinfo.num_components; ++i) cinfo.comp_info[i].h_samp_factor = cinfo.comp_info[i].v_samp_factor = 1;
  cinfo.dct_method = JDCT_ISLOW;
  jpeg_start_compress(&cinfo, TRUE);
  for (const Marker& m : markers)
    jpeg_write_marker(&cinfo, m.code, m.data.data(), static_cast<unsigned>(m.data.size()));
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(&p.samples[cinfo.next_scanline * static_cast<size_t>(p.width * p.channels)]);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::fclose(file);
  std::printf("wrote %s\n", path.c_str());
}

// RGB PNG whose EXIF block (without the "Exif\0\0" prefix) is an eXIf chunk.
void write_png_with_exif(const std::string& path, const Picture& p, std::vector<uint8_t> tiff) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) std::perror(path.c_str()), std::exit(1);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (png == nullptr || info == nullptr || setjmp(png_jmpbuf(png))) std::fprintf(stderr, "libpng failed\n"), std::exit(1);
  png_init_io(png, file);
  png_set_IHDR(png, info, static_cast<png_uint_32>(p.width), static_cast<png_uint_32>(p.height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_eXIf_1(png, info, static_cast<png_uint_32>(tiff.size()), tiff.data());
  png_write_info(png, info);
  for (int y = 0; y < p.height; ++y)
    png_write_row(png, &p.samples[static_cast<size_t>(y * p.width * 3)]);
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  std::fclose(file);
  std::printf("wrote %s\n", path.c_str());
}

// The CMYK picture: ink per block (cyan 36c, magenta 40r, yellow 255 - 32c, black 12(c + r)), stored inverted as
// Photoshop stores it (sample = 255 - ink).
Picture displayed_inverted_cmyk() {
  Picture p{kHeight, kWidth, 4, std::vector<uint8_t>(kHeight * kWidth * 4)};
  for (int y = 0; y < kHeight; ++y)
    for (int x = 0; x < kWidth; ++x) {
      const int r = y / kBlock, c = x / kBlock;
      const int ink[4] = {36 * c, 40 * r, 255 - 32 * c, 12 * (c + r)};
      for (int k = 0; k < 4; ++k) p.at(y, x)[k] = static_cast<uint8_t>(255 - ink[k]);
    }
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string out = std::string(argv[1]) + "/";
  const std::string size = std::to_string(kHeight) + "x" + std::to_string(kWidth);
  const Picture shown = displayed_rgb();
  for (int k = 1; k <= 8; ++k)
    write_jpeg(out + "image_exif_orient" + std::to_string(k) + "_" + size + ".jpg", stored_for(shown, k), JCS_RGB,
               false, {{JPEG_APP0 + 1, exif_block(k, false)}});
  for (int k : {3, 6, 8})
    write_jpeg(out + "image_exif_be_orient" + std::to_string(k) + "_" + size + ".jpg", stored_for(shown, k),
               JCS_RGB, false, {{JPEG_APP0 + 1, exif_block(k, true)}});
  // Malformed EXIF, read by Pillow as orientation 1: a value offset past the block ends IFD0 before Orientation 6;
  // a TIFF header Pillow refuses.
  write_jpeg(out + "image_exif_cut_orient6_" + size + ".jpg", shown, JCS_RGB, false,
             {{JPEG_APP0 + 1, exif_block(6, false, 0xfffff0)}});
  std::vector<uint8_t> bad_header = exif_block(6, false);
  bad_header[6] = 'X';
  write_jpeg(out + "image_exif_badheader_" + size + ".jpg", shown, JCS_RGB, false, {{JPEG_APP0 + 1, bad_header}});
  // No EXIF; XMP says orientation 6 (Pillow 11.2.1 and later read it from a JPEG).
  write_jpeg(out + "image_xmp_orient6_" + size + ".jpg", stored_for(shown, 6), JCS_RGB, false,
             {{JPEG_APP0 + 1, xmp_packet(6)}});
  // PNG with an eXIf chunk.
  std::vector<uint8_t> tiff = exif_block(6, true);
  tiff.erase(tiff.begin(), tiff.begin() + 6);
  write_png_with_exif(out + "image_png_exif_orient6_" + size + ".png", stored_for(shown, 6), tiff);
  // 4-channel JPEGs: inverted CMYK with and without Adobe's marker, YCCK, and YCCK with EXIF orientation 8.
  const Picture cmyk = displayed_inverted_cmyk();
  write_jpeg(out + "image_cmyk_adobe_" + size + ".jpg", cmyk, JCS_CMYK, true, {});
  write_jpeg(out + "image_cmyk_plain_" + size + ".jpg", cmyk, JCS_CMYK, false, {});
  write_jpeg(out + "image_ycck_" + size + ".jpg", cmyk, JCS_YCCK, true, {});
  write_jpeg(out + "image_ycck_orient8_" + size + ".jpg", stored_for(cmyk, 8), JCS_YCCK, true,
             {{JPEG_APP0 + 1, exif_block(8, true)}});
  return 0;
}
