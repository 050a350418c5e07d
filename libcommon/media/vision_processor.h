// The Qwen2-VL/Qwen3-VL vision preprocessing (HF's Qwen2VLImageProcessor, torchvision backend): smart_resize,
// bicubic resize, rescale + normalise, and patchify into merge-window-ordered pixel_values with their grid.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "media/image_rgb.h"

namespace veomni {

struct VisionProcessorConfig {
  int64_t patch_size = 16, temporal_patch_size = 2, merge_size = 2;
  int64_t min_pixels = 65536, max_pixels = 16777216;  // HF's size.shortest_edge / size.longest_edge
  std::array<double, 3> image_mean{0.5, 0.5, 0.5}, image_std{0.5, 0.5, 0.5};
  double rescale_factor = 1.0 / 255;
};

// What Qwen3-VL checkpoints ship in preprocessor_config.json (transformers has no Qwen3-VL image processor of its
// own: it uses Qwen2VLImageProcessor with these): patch 16, temporal 2, merge 2, shortest_edge 65536 (256^2),
// longest_edge 16777216 (4096^2), mean = std = 0.5, rescale 1/255.
VisionProcessorConfig qwen3_vl_image_config();

// Reads a HF preprocessor_config.json (or a processor_config.json holding it under "image_processor") over
// `defaults`: size.{shortest_edge,longest_edge}, then min_pixels/max_pixels override them (as HF's constructor
// does), patch_size, temporal_patch_size, merge_size, image_mean, image_std, rescale_factor. Wrong types or
// values, do_resize/do_rescale/do_normalize false and a resample other than bicubic (3) are InputErrors naming the
// file and key.
VisionProcessorConfig vision_config_from_json(const std::string& preprocessor_config_json_path,
                                              VisionProcessorConfig defaults);

struct ResizedShape {
  int64_t height, width;
};

// HF's smart_resize: both sides multiples of `factor`, rounded half to even, then scaled down (floor) past
// max_pixels or up (ceil) below min_pixels keeping the aspect ratio. An aspect ratio above 200 is an InputError
// naming `source`.
ResizedShape smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels, int64_t max_pixels,
                          const std::string& source = "image");

struct VisionPatches {
  Tensor pixel_values;  // f32 [grid_t * grid_h * grid_w, 3 * temporal_patch_size * patch_size^2]
  std::array<int64_t, 3> grid_thw{};
};

// Frames of one size (a multiple of patch_size * merge_size on both sides) -> patches. A frame count that is not a
// multiple of temporal_patch_size is padded by repeating the last frame (a still image becomes 2 equal frames).
// Rows go merge window by merge window (t, h/merge, w/merge, merge row, merge column); features are (channel,
// frame in the temporal patch, y, x); values are (v - mean*255) / (std*255) in float32, as HF's fused
// rescale-and-normalise computes them.
VisionPatches patchify_frames(const std::vector<RgbImage>& frames, const VisionProcessorConfig& config);

// smart_resize (factor patch_size * merge_size) + resize_bicubic + patchify_frames of the image alone.
VisionPatches process_image(const RgbImage& image, const VisionProcessorConfig& config,
                            const std::string& source = "image");

}  // namespace veomni
