// Decoding video files with FFmpeg's libraries into RGB frames, and sampling them as the Qwen video processors do.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "media/image_rgb.h"
#include "media/video_sampling.h"

namespace veomni {

// What HF's video loaders report (torchcodec, exact seek mode): the frame count from a scan of the stream's packets,
// the stream's average frame rate (its header's r_frame_rate when that is missing), duration = frames / fps.
struct VideoInfo {
  double fps = 0;
  int64_t num_frames = 0;
  double duration_seconds = 0;
  int64_t height = 0, width = 0;
};

struct SampledVideo {
  std::vector<RgbImage> frames;            // the sampled frames, in order
  std::vector<int64_t> frame_indices;      // their indices in the whole video
  std::vector<double> timestamps_seconds;  // index / fps of each sampled frame
  VideoInfo info;                          // of the whole video
};

// Reads the container and counts the video stream's packets without decoding. InputError naming the path when the
// file is missing, unreadable or corrupt, has no video stream (cover art does not count), uses a codec this FFmpeg
// cannot decode, or holds no frame.
VideoInfo probe_video(const std::string& path);

// Decodes the frames at the given ascending indices (repeats allowed) and converts them to RGB24 with libswscale
// (bilinear, the source's colour matrix and range, full-range RGB out, as torchcodec and PyAV convert). InputError
// naming the path as probe_video, and for corrupt data, an index past the decodable frames, or a size change.
std::vector<RgbImage> decode_video_frames(const std::string& path, const std::vector<int64_t>& frame_indices);

// probe_video, sample_frame_indices under the config, decode_video_frames.
SampledVideo decode_video(const std::string& path, const VideoSamplingConfig& config);

}  // namespace veomni
