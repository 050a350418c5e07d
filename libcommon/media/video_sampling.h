// Which frames the Qwen video processors keep, their timestamps, and the video resize rule (transformers 5.17).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "media/vision_processor.h"

namespace veomni {

// The frame-sampling rule of a HF video processor class.
enum class FrameSamplingRule {
  kQwen3VL,  // Qwen3VLVideoProcessor: linspace over the whole video, any count (patchify pads to the temporal patch)
  kQwen2VL,  // Qwen2VLVideoProcessor (Qwen3-Omni uses it): count floored to a temporal-patch multiple, arange stride
};

// A video processor's sampling and resize settings (HF: fps, min_frames, max_frames, temporal_patch_size, and
// size = {shortest_edge: min_pixels, longest_edge: max_pixels}).
struct VideoSamplingConfig {
  FrameSamplingRule rule = FrameSamplingRule::kQwen3VL;
  double fps = 2.0;
  int64_t min_frames = 4, max_frames = 768;
  int64_t temporal_patch_size = 2;
  int64_t patch_size = 16, merge_size = 2;
  int64_t min_pixels = 128 * 32 * 32, max_pixels = 768 * 32 * 32;
};

// Qwen3VLVideoProcessor's class defaults in transformers 5.17: fps 2, frames in [4, 768], temporal patch 2, patch 16,
// merge 2, size {shortest_edge 131072, longest_edge 786432}; cap_pixels_per_frame unset (= off).
VideoSamplingConfig qwen3_vl_video_sampling();

// Qwen3-Omni's video processor is Qwen2VLVideoProcessor, with the Qwen3-Omni processor's size defaults
// {shortest_edge 131072, longest_edge 786432} and the checkpoint's patch 16 / merge 2 / temporal patch 2. That class
// samples nothing unless asked (do_sample_frames False, fps None); this config is its rule when asked with fps 2.
VideoSamplingConfig qwen3_omni_video_sampling();

// The frame indices HF's sample_frames returns for a video of num_frames frames at video_fps (ascending; InputError
// when num_frames < 1, video_fps <= 0, or the Qwen2-VL rule leaves no frame).
std::vector<int64_t> sample_frame_indices(int64_t num_frames, double video_fps, const VideoSamplingConfig& config);

// Qwen3VLProcessor._calculate_timestamps: the sampled frames' times (index / video_fps), padded with the last frame
// to a multiple of merge_size, then the mean of the first and last time of each group: one per temporal patch.
std::vector<double> qwen3_vl_frame_timestamps(const std::vector<int64_t>& frame_indices, double video_fps,
                                              int64_t merge_size);

// The text Qwen3-VL puts before each temporal patch: "<{t:.1f} seconds>" (Python's correctly rounded format).
std::string qwen3_vl_timestamp_text(double seconds);

// Qwen3-VL's video smart_resize: like the image rule, but the pixel limits bound t·h·w, with t the frame count rounded
// to the temporal factor; frames smaller than the factor are first scaled up. InputError when num_frames <
// temporal_factor or the aspect ratio exceeds 200.
ResizedShape video_smart_resize(int64_t num_frames, int64_t height, int64_t width, int64_t temporal_factor,
                                int64_t factor, int64_t min_pixels, int64_t max_pixels);

// The size every sampled frame is resized to under the config's rule: video_smart_resize for Qwen3-VL, the per-frame
// image smart_resize for Qwen2-VL; factor = patch_size · merge_size.
ResizedShape resized_video_frame_shape(int64_t num_sampled_frames, int64_t height, int64_t width,
                                       const VideoSamplingConfig& config);

}  // namespace veomni
