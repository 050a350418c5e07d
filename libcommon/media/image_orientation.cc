// The eight EXIF orientations as pixel moves: for each displayed pixel, the stored pixel it comes from.
#include "media/image_orientation.h"

#include <cstring>
#include <utility>

namespace veomni {
namespace {

struct StoredPosition {
  int64_t y, x;
};

// Where displayed pixel (y, x) lies in the stored image of `height` x `width` (Pillow's Geometry.c moves, inverted).
StoredPosition source_of(int orientation, int64_t y, int64_t x, int64_t height, int64_t width) {
  switch (orientation) {
    case 2: return {y, width - 1 - x};
    case 3: return {height - 1 - y, width - 1 - x};
    case 4: return {height - 1 - y, x};
    case 5: return {x, y};
    case 6: return {height - 1 - x, y};
    case 7: return {height - 1 - x, width - 1 - y};
    case 8: return {x, width - 1 - y};
    default: return {y, x};
  }
}

}  // namespace

RgbImage apply_orientation(RgbImage image, int orientation) {
  if (orientation < 2 || orientation > 8) return image;
  const bool swaps_axes = orientation >= 5;
  RgbImage out;
  out.height = swaps_axes ? image.width : image.height;
  out.width = swaps_axes ? image.height : image.width;
  out.pixels.resize(image.pixels.size());
  uint8_t* target = out.pixels.data();
  for (int64_t y = 0; y < out.height; ++y) {
    for (int64_t x = 0; x < out.width; ++x, target += 3) {
      const StoredPosition from = source_of(orientation, y, x, image.height, image.width);
      std::memcpy(target, image.pixels.data() + (from.y * image.width + from.x) * 3, 3);
    }
  }
  return out;
}

}  // namespace veomni
