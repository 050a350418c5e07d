// Images, videos and audio clips of multimodal conversations through the Qwen3-VL / Qwen3-Omni processors.
#include "media/multimodal_media.h"

#include "core/error.h"
#include "data/audio_length.h"
#include "media/audio_decode.h"
#include "media/bicubic_resize.h"
#include "media/image_decode.h"
#include "media/video_decode.h"

namespace veomni {

namespace {

// Qwen3-Omni checkpoints' preprocessor_config.json (Qwen2VLImageProcessor).
constexpr int64_t kOmniImageMinPixels = 3136;
constexpr int64_t kOmniImageMaxPixels = 12845056;

void share_patch_sizes(MultimodalMediaConfig& config) {
  config.video.patch_size = config.image.patch_size;
  config.video.temporal_patch_size = config.image.temporal_patch_size;
  config.video.merge_size = config.image.merge_size;
}

ProcessedMedia process_video(const std::string& path, const MultimodalMediaConfig& config) {
  const SampledVideo video = decode_video(path, config.video);
  const ResizedShape shape = resized_video_frame_shape(static_cast<int64_t>(video.frames.size()), video.info.height,
                                                       video.info.width, config.video);
  std::vector<RgbImage> resized;
  resized.reserve(video.frames.size());
  for (const RgbImage& frame : video.frames) resized.push_back(resize_bicubic(frame, shape.height, shape.width));
  ProcessedMedia out;
  out.kind = PartKind::Video;
  out.patches = patchify_frames(resized, config.image);
  out.frame_seconds =
      qwen3_vl_frame_timestamps(video.frame_indices, video.info.fps, config.video.temporal_patch_size);
  out.second_per_grid = static_cast<double>(config.video.temporal_patch_size) / config.video.fps;
  return out;
}

ProcessedMedia process_audio(const std::string& path, const MultimodalMediaConfig& config) {
  ProcessedMedia out;
  out.kind = PartKind::Audio;
  const std::vector<float> samples = decode_audio(path, config.audio.sampling_rate);
  try {
    out.features = whisper_log_mel(samples, config.audio);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", path, e.what()));
  }
  return out;
}

}  // namespace

MultimodalMediaConfig default_media_config(MultimodalModel model) {
  MultimodalMediaConfig config;
  config.model = model;
  config.image = qwen3_vl_image_config();
  if (model == MultimodalModel::Qwen3VL) {
    config.video = qwen3_vl_video_sampling();
  } else {
    config.image.min_pixels = kOmniImageMinPixels;
    config.image.max_pixels = kOmniImageMaxPixels;
    config.video = qwen3_omni_video_sampling();
  }
  share_patch_sizes(config);
  return config;
}

MultimodalMediaConfig media_config_from_json(const std::string& path, MultimodalModel model) {
  MultimodalMediaConfig config = default_media_config(model);
  config.image = vision_config_from_json(path, config.image);
  share_patch_sizes(config);
  return config;
}

ProcessedMedia process_media(const ContentPart& part, const MultimodalMediaConfig& config) {
  switch (part.kind) {
    case PartKind::Image: {
      ProcessedMedia out;
      out.kind = PartKind::Image;
      out.patches = process_image(decode_image(part.value), config.image, part.value);
      return out;
    }
    case PartKind::Video: return process_video(part.value, config);
    case PartKind::Audio: return process_audio(part.value, config);
    case PartKind::Text: break;
  }
  VEOMNI_CHECK(false, "process_media called on a text part");
  return {};
}

MediaExtent media_extent(const ProcessedMedia& media, const MultimodalMediaConfig& config) {
  MediaExtent extent;
  extent.kind = media.kind;
  const int64_t merge = config.image.merge_size * config.image.merge_size;
  const auto& grid = media.patches.grid_thw;
  switch (media.kind) {
    case PartKind::Image: extent.tokens = grid[0] * grid[1] * grid[2] / merge; break;
    case PartKind::Video:
      extent.blocks = grid[0];
      extent.tokens = grid[1] * grid[2] / merge;
      if (config.model == MultimodalModel::Qwen3VL) {
        VEOMNI_CHECK(static_cast<int64_t>(media.frame_seconds.size()) == grid[0], "{} timestamps for {} patches",
                     media.frame_seconds.size(), grid[0]);
        for (double seconds : media.frame_seconds) extent.block_texts.push_back(qwen3_vl_timestamp_text(seconds));
        extent.outer_markers = true;
      } else {
        // Qwen3-Omni writes a video as one block without timestamps.
        extent.tokens *= extent.blocks;
        extent.blocks = 1;
      }
      break;
    case PartKind::Audio: extent.tokens = audio_output_length(media.features.dim(0)); break;
    case PartKind::Text: break;
  }
  return extent;
}

}  // namespace veomni
