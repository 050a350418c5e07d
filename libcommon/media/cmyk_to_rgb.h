// Converting the CMYK samples libjpeg decodes from a 4-channel (CMYK or YCCK) JPEG to RGB exactly as Pillow does.
#pragma once
#include <cstddef>
#include <cstdint>

namespace veomni {

// Pillow opens every 4-channel JPEG as "CMYK;I" (Adobe's convention: the stored samples are inverted, 255 = no
// ink), whether or not the file has an Adobe marker, so ink = 255 - sample; convert("RGB") then gives
// channel = clip(255 - K - round255(ink * (255 - K))) with K the black ink and round255(p) = ((p + 128) / 256 +
// p + 128) / 256 (integer division). `cmyk`: `pixels` x 4 samples as stored; `rgb`: `pixels` x 3.
void inverted_cmyk_to_rgb(const uint8_t* cmyk, uint8_t* rgb, size_t pixels);

}  // namespace veomni
