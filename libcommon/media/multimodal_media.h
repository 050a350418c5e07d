// One media part of a multimodal conversation through its processor: image/video patches or audio log-mel features.
#pragma once
#include <string>
#include <vector>

#include "core/tensor.h"
#include "media/multimodal_record.h"
#include "media/multimodal_tokens.h"
#include "media/video_sampling.h"
#include "media/vision_processor.h"
#include "media/whisper_mel.h"

namespace veomni {

struct MultimodalMediaConfig {
  MultimodalModel model = MultimodalModel::Qwen3VL;
  VisionProcessorConfig image;
  VideoSamplingConfig video;
  WhisperMelConfig audio;
};

// The processors' defaults. Qwen3-VL: qwen3_vl_image_config, qwen3_vl_video_sampling. Qwen3-Omni: the checkpoint's
// Qwen2VLImageProcessor settings (those of qwen3_vl_image_config with min_pixels 3136 and max_pixels 12845056),
// qwen3_omni_video_sampling (fps 2), Whisper at 16 kHz with 128 mel bins.
MultimodalMediaConfig default_media_config(MultimodalModel model);

// The defaults overridden by a HF preprocessor_config.json (vision_config_from_json); its patch, temporal patch and
// merge sizes apply to videos too.
MultimodalMediaConfig media_config_from_json(const std::string& path, MultimodalModel model);

struct ProcessedMedia {
  PartKind kind = PartKind::Image;
  VisionPatches patches;              // image, video
  std::vector<double> frame_seconds;  // video: Qwen3-VL's time of each temporal patch
  double second_per_grid = 0;         // video: temporal_patch_size / sampling fps (Qwen3-Omni positions)
  Tensor features;                    // audio: f32 [mel frames, n_mels]
};

// Decodes and processes one media part. Images: decode_image, process_image. Videos: decode_video (sampling at the
// config's fps), resized_video_frame_shape, resize_bicubic, patchify_frames. Audio: decode_audio at 16 kHz,
// whisper_log_mel. InputError naming the media path for a missing, corrupt or unsupported file.
ProcessedMedia process_media(const ContentPart& part, const MultimodalMediaConfig& config);

// The tokens the part takes: t·h·w / merge² for an image; per temporal patch h·w / merge² for a video (with the
// "<t seconds>" texts and the outer <|vision_start|> / <|vision_end|> under Qwen3-VL, as transformers 5.17);
// audio_output_length(mel frames) for audio.
MediaExtent media_extent(const ProcessedMedia& media, const MultimodalMediaConfig& config);

}  // namespace veomni
