// Frame sampling, timestamps and resize sizes of the Qwen video processors, replaying transformers 5.17's arithmetic.
#include "media/video_sampling.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace veomni {

VideoSamplingConfig qwen3_vl_video_sampling() { return VideoSamplingConfig{}; }

VideoSamplingConfig qwen3_omni_video_sampling() {
  VideoSamplingConfig config;
  config.rule = FrameSamplingRule::kQwen2VL;
  return config;
}

namespace {

// np.linspace(0, num_frames - 1, count).round(): i·step with step = (n-1)/(count-1), the last set to n-1 exactly,
// rounded half to even (the default rounding mode, as numpy's round).
std::vector<int64_t> linspace_rounded(int64_t num_frames, int64_t count) {
  std::vector<int64_t> indices(static_cast<size_t>(count));
  const double stop = static_cast<double>(num_frames - 1);
  const double step = count > 1 ? stop / static_cast<double>(count - 1) : 0.0;
  for (int64_t i = 0; i < count; ++i) {
    const double value = (count > 1 && i == count - 1) ? stop : static_cast<double>(i) * step;
    indices[static_cast<size_t>(i)] = static_cast<int64_t>(std::nearbyint(value));
  }
  return indices;
}

std::vector<int64_t> qwen3_vl_indices(int64_t num_frames, double video_fps, const VideoSamplingConfig& config) {
  // int(total / fps * target_fps), then min(max(n, min_frames), max_frames, total)
  auto count = static_cast<int64_t>(static_cast<double>(num_frames) / video_fps * config.fps);
  count = std::min({std::max(count, config.min_frames), config.max_frames, num_frames});
  return linspace_rounded(num_frames, count);
}

// torch.arange(0, n, n / count) in float32, then .int(): CPU arange computes start + step·i in double and stores
// float; its length is ceil(n / step), computed in double.
std::vector<int64_t> arange_truncated(int64_t num_frames, int64_t count) {
  const double end = static_cast<double>(num_frames);
  const double step = end / static_cast<double>(count);
  const auto length = static_cast<int64_t>(std::ceil(end / step));
  std::vector<int64_t> indices(static_cast<size_t>(length));
  for (int64_t i = 0; i < length; ++i)
    indices[static_cast<size_t>(i)] = static_cast<int64_t>(static_cast<float>(step * static_cast<double>(i)));
  return indices;
}

std::vector<int64_t> qwen2_vl_indices(int64_t num_frames, double video_fps, const VideoSamplingConfig& config) {
  const auto tps = static_cast<double>(config.temporal_patch_size);
  const double max_frames = std::floor(static_cast<double>(std::min(config.max_frames, num_frames)) / tps) * tps;
  double count = static_cast<double>(num_frames) / video_fps * config.fps;
  count = std::min({std::max(count, static_cast<double>(config.min_frames)), max_frames,
                    static_cast<double>(num_frames)});
  const auto whole = static_cast<int64_t>(std::floor(count / tps) * tps);
  VEOMNI_INPUT_CHECK(whole > 0, "a video of {} frames yields no group of temporal_patch_size={} frames", num_frames,
                     config.temporal_patch_size);
  return arange_truncated(num_frames, whole);
}

}  // namespace

std::vector<int64_t> sample_frame_indices(int64_t num_frames, double video_fps, const VideoSamplingConfig& config) {
  VEOMNI_INPUT_CHECK(num_frames >= 1, "cannot sample frames from a video of {} frames", num_frames);
  VEOMNI_INPUT_CHECK(std::isfinite(video_fps) && video_fps > 0, "video frame rate must be positive, got {}",
                     video_fps);
  VEOMNI_INPUT_CHECK(config.fps > 0 && config.temporal_patch_size >= 1 && config.min_frames >= 1 &&
                         config.max_frames >= config.min_frames,
                     "bad video sampling settings: fps {}, frames in [{}, {}], temporal_patch_size {}", config.fps,
                     config.min_frames, config.max_frames, config.temporal_patch_size);
  return config.rule == FrameSamplingRule::kQwen3VL ? qwen3_vl_indices(num_frames, video_fps, config)
                                                    : qwen2_vl_indices(num_frames, video_fps, config);
}

std::vector<double> qwen3_vl_frame_timestamps(const std::vector<int64_t>& frame_indices, double video_fps,
                                              int64_t merge_size) {
  VEOMNI_CHECK(merge_size >= 1 && video_fps > 0, "merge_size {} and video_fps {} must be positive", merge_size,
               video_fps);
  std::vector<int64_t> padded = frame_indices;
  while (!padded.empty() && padded.size() % static_cast<size_t>(merge_size) != 0) padded.push_back(padded.back());
  std::vector<double> timestamps;
  for (size_t i = 0; i < padded.size(); i += static_cast<size_t>(merge_size)) {
    const double first = static_cast<double>(padded[i]) / video_fps;
    const double last = static_cast<double>(padded[i + static_cast<size_t>(merge_size) - 1]) / video_fps;
    timestamps.push_back((first + last) / 2);
  }
  return timestamps;
}

std::string qwen3_vl_timestamp_text(double seconds) { return fmt::format("<{:.1f} seconds>", seconds); }

ResizedShape video_smart_resize(int64_t num_frames, int64_t height, int64_t width, int64_t temporal_factor,
                                int64_t factor, int64_t min_pixels, int64_t max_pixels) {
  VEOMNI_INPUT_CHECK(num_frames >= temporal_factor, "a video needs at least {} frames (temporal patch), got {}",
                     temporal_factor, num_frames);
  VEOMNI_INPUT_CHECK(height > 0 && width > 0, "video frames of {}x{} pixels cannot be resized", width, height);
  if (height < factor || width < factor) {  // scale up so the short side reaches the factor (int() truncates)
    const double scale = std::max(static_cast<double>(factor) / static_cast<double>(height),
                                  static_cast<double>(factor) / static_cast<double>(width));
    height = static_cast<int64_t>(static_cast<double>(height) * scale);
    width = static_cast<int64_t>(static_cast<double>(width) * scale);
  }
  const double aspect = static_cast<double>(std::max(height, width)) / static_cast<double>(std::min(height, width));
  VEOMNI_INPUT_CHECK(aspect <= 200, "video frames of {}x{} have aspect ratio {:.1f}; at most 200 is supported", width,
                     height, aspect);
  const auto f = static_cast<double>(factor);
  const auto h = static_cast<double>(height), w = static_cast<double>(width);
  auto h_bar = static_cast<int64_t>(std::nearbyint(h / f)) * factor;
  auto w_bar = static_cast<int64_t>(std::nearbyint(w / f)) * factor;
  const auto t_bar = static_cast<int64_t>(std::nearbyint(static_cast<double>(num_frames) /
                                                         static_cast<double>(temporal_factor))) * temporal_factor;
  const auto volume = static_cast<double>(num_frames * height * width);
  if (t_bar * h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(volume / static_cast<double>(max_pixels));
    h_bar = std::max(factor, static_cast<int64_t>(std::floor(h / beta / f)) * factor);
    w_bar = std::max(factor, static_cast<int64_t>(std::floor(w / beta / f)) * factor);
  } else if (t_bar * h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / volume);
    h_bar = static_cast<int64_t>(std::ceil(h * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(w * beta / f)) * factor;
  }
  return ResizedShape{h_bar, w_bar};
}

ResizedShape resized_video_frame_shape(int64_t num_sampled_frames, int64_t height, int64_t width,
                                       const VideoSamplingConfig& config) {
  const int64_t factor = config.patch_size * config.merge_size;
  if (config.rule == FrameSamplingRule::kQwen3VL)
    return video_smart_resize(num_sampled_frames, height, width, config.temporal_patch_size, factor,
                              config.min_pixels, config.max_pixels);
  return smart_resize(height, width, factor, config.min_pixels, config.max_pixels);
}

}  // namespace veomni
