// Bicubic resizing of 8-bit RGB images, bit-exact with torchvision's resize of uint8 tensors on the CPU (what HF's
// Qwen2-VL/Qwen3-VL image processor runs: BICUBIC, antialias=True).
#pragma once
#include <cstdint>

#include "media/image_rgb.h"

namespace veomni {

// torch's separable antialiased kernel: Keys cubic with a = -0.5 widened by the scale when shrinking, weights
// normalised over the taps inside the image, rounded to int16 fixed point; the horizontal pass runs first and its
// result is rounded to uint8 before the vertical pass. An unchanged size is returned as is. Sizes must be > 0.
RgbImage resize_bicubic(const RgbImage& image, int64_t height, int64_t width);

}  // namespace veomni
