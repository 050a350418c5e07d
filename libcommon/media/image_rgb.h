// An 8-bit RGB picture in memory (height x width x 3, row-major): what the image and video decoders produce.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace veomni {

struct RgbImage {
  int64_t height = 0, width = 0;
  std::vector<uint8_t> pixels;  // HWC, RGB

  uint8_t at(int64_t y, int64_t x, int64_t channel) const {
    return pixels[static_cast<size_t>((y * width + x) * 3 + channel)];
  }
};

}  // namespace veomni
