// Pillow's CMYK -> RGB rule (Unpack.c "CMYK;I" inversion, then Convert.c's cmyk2rgb), written out per pixel.
#include "media/cmyk_to_rgb.h"

#include <algorithm>

namespace veomni {
namespace {

// a * b / 255 rounded, in the shift form Pillow uses (equal to it for a, b in 0..255).
int multiply_div255(int a, int b) {
  const int p = a * b + 128;
  return ((p >> 8) + p) >> 8;
}

}  // namespace

void inverted_cmyk_to_rgb(const uint8_t* cmyk, uint8_t* rgb, size_t pixels) {
  for (size_t i = 0; i < pixels; ++i, cmyk += 4, rgb += 3) {
    const int white = cmyk[3];  // 255 - black ink: the stored sample is already inverted
    for (int c = 0; c < 3; ++c) {
      const int ink = 255 - cmyk[c];
      rgb[c] = static_cast<uint8_t>(std::clamp(white - multiply_div255(ink, white), 0, 255));
    }
  }
}

}  // namespace veomni
