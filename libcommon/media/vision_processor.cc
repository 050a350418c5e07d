// smart_resize, patchify and the whole image path of HF's Qwen2-VL image processor (as Qwen3-VL uses it).
#include "media/vision_processor.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "media/bicubic_resize.h"

namespace veomni {
namespace {

// (v - mean) / std for every 8-bit value of each channel, with mean and std pre-scaled by 1/rescale_factor in
// float32: HF fuses rescale into normalise this way, so the table reproduces its float32 results exactly.
std::array<std::array<float, 256>, 3> normalisation_table(const VisionProcessorConfig& config) {
  const auto unscale = static_cast<float>(1.0 / config.rescale_factor);
  std::array<std::array<float, 256>, 3> table{};
  for (size_t c = 0; c < 3; ++c) {
    const float mean = static_cast<float>(config.image_mean[c]) * unscale;
    const float std = static_cast<float>(config.image_std[c]) * unscale;
    for (int v = 0; v < 256; ++v) table[c][static_cast<size_t>(v)] = (static_cast<float>(v) - mean) / std;
  }
  return table;
}

void check_frames(const std::vector<RgbImage>& frames, const VisionProcessorConfig& config) {
  VEOMNI_CHECK(!frames.empty(), "patchify needs at least one frame");
  const int64_t factor = config.patch_size * config.merge_size;
  const RgbImage& first = frames.front();
  VEOMNI_CHECK(first.height > 0 && first.width > 0 && first.height % factor == 0 && first.width % factor == 0,
               "frames of {}x{} are not multiples of patch_size * merge_size = {}", first.height, first.width, factor);
  for (const RgbImage& frame : frames)
    VEOMNI_CHECK(frame.height == first.height && frame.width == first.width &&
                     static_cast<int64_t>(frame.pixels.size()) == frame.height * frame.width * 3,
                 "frames differ in size ({}x{} vs {}x{}) or hold the wrong byte count", frame.height, frame.width,
                 first.height, first.width);
}

}  // namespace

ResizedShape smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels, int64_t max_pixels,
                          const std::string& source) {
  VEOMNI_CHECK(factor > 0 && min_pixels > 0 && max_pixels >= min_pixels,
               "smart_resize: factor {} and pixel limits [{}, {}] must be positive and ordered", factor, min_pixels,
               max_pixels);
  VEOMNI_INPUT_CHECK(height > 0 && width > 0, "{}: image of {}x{} has no pixels", source, height, width);
  const double ratio = static_cast<double>(std::max(height, width)) / static_cast<double>(std::min(height, width));
  VEOMNI_INPUT_CHECK(ratio <= 200.0, "{}: absolute aspect ratio must be at most 200, got {} ({}x{})", source, ratio,
                     height, width);
  const auto h = static_cast<double>(height), w = static_cast<double>(width), f = static_cast<double>(factor);
  // std::nearbyint rounds half to even under the default rounding mode, as Python's round() does.
  auto h_bar = static_cast<int64_t>(std::nearbyint(h / f)) * factor;
  auto w_bar = static_cast<int64_t>(std::nearbyint(w / f)) * factor;
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(h * w / static_cast<double>(max_pixels));
    h_bar = std::max(factor, static_cast<int64_t>(std::floor(h / beta / f)) * factor);
    w_bar = std::max(factor, static_cast<int64_t>(std::floor(w / beta / f)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (h * w));
    h_bar = static_cast<int64_t>(std::ceil(h * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(w * beta / f)) * factor;
  }
  return {h_bar, w_bar};
}

VisionPatches patchify_frames(const std::vector<RgbImage>& frames, const VisionProcessorConfig& config) {
  check_frames(frames, config);
  const int64_t p = config.patch_size, m = config.merge_size, tps = config.temporal_patch_size;
  const auto frame_count = static_cast<int64_t>(frames.size());
  const int64_t grid_t = (frame_count + tps - 1) / tps;
  const int64_t grid_h = frames.front().height / p, grid_w = frames.front().width / p;
  const int64_t width = frames.front().width;
  const int64_t features = 3 * tps * p * p;
  const auto table = normalisation_table(config);

  VisionPatches out;
  out.grid_thw = {grid_t, grid_h, grid_w};
  out.pixel_values = Tensor::empty({grid_t * grid_h * grid_w, features}, DType::F32);
  float* dst = out.pixel_values.data<float>();
  for (int64_t t = 0; t < grid_t; ++t)
    for (int64_t block_y = 0; block_y < grid_h / m; ++block_y)
      for (int64_t block_x = 0; block_x < grid_w / m; ++block_x)
        for (int64_t merge_y = 0; merge_y < m; ++merge_y)
          for (int64_t merge_x = 0; merge_x < m; ++merge_x) {
            const int64_t top = (block_y * m + merge_y) * p, left = (block_x * m + merge_x) * p;
            for (int64_t c = 0; c < 3; ++c)
              for (int64_t dt = 0; dt < tps; ++dt) {
                // Past the last frame the last frame repeats (HF pads the time axis this way).
                const RgbImage& frame = frames[static_cast<size_t>(std::min(t * tps + dt, frame_count - 1))];
                const auto& lut = table[static_cast<size_t>(c)];
                for (int64_t y = 0; y < p; ++y) {
                  const uint8_t* src = frame.pixels.data() + ((top + y) * width + left) * 3 + c;
                  for (int64_t x = 0; x < p; ++x) *dst++ = lut[src[x * 3]];
                }
              }
          }
  return out;
}

VisionPatches process_image(const RgbImage& image, const VisionProcessorConfig& config, const std::string& source) {
  const ResizedShape size = smart_resize(image.height, image.width, config.patch_size * config.merge_size,
                                         config.min_pixels, config.max_pixels, source);
  return patchify_frames({resize_bicubic(image, size.height, size.width)}, config);
}

}  // namespace veomni
