// 3-D M-RoPE position ids of one sample: Qwen3-VL's and the Qwen3-Omni thinker's get_rope_index (transformers 5.17).
#pragma once
#include <cstdint>
#include <vector>

#include "data/constants.h"

namespace veomni {

// One row of image_grid_thw / video_grid_thw: patches in time, height and width before the spatial merge.
struct VisionGrid {
  int64_t t = 1;
  int64_t h = 0;
  int64_t w = 0;
  int64_t patches() const { return t * h * w; }
};

// Position ids of one sample as a row-major (3, L) array (rows: temporal, height, width) and its rope delta
// (max position + 1 - number of attended tokens). Tokens outside the attention mask hold 0.
template <typename T>
struct MropePositions {
  std::vector<T> position_ids;
  T rope_delta = 0;
  int64_t length() const { return static_cast<int64_t>(position_ids.size() / 3); }
  T at(int64_t row, int64_t column) const { return position_ids[static_cast<size_t>(row * length() + column)]; }
};

// Which input ids are image / video tokens. Defaults are the real Qwen3 tokenizer ids (<|image_pad|>,
// <|video_pad|>); VeOmni computes positions on ids where they are already replaced by -200/-300 (see
// with_veomni_placeholders). spatial_merge_size is vision_config.spatial_merge_size.
struct Qwen3VlRopeOptions {
  int64_t image_token_id = 151655;
  int64_t video_token_id = 151656;
  int64_t spatial_merge_size = 2;
};

struct Qwen3VlMedia {
  std::vector<VisionGrid> images;  // image_grid_thw, in text order
  std::vector<VisionGrid> videos;  // video_grid_thw (whole videos: each frame is its own run of tokens in the text)
};

// Qwen3VLModel.get_rope_index for one sample. Each run of consecutive image (video) tokens takes the next image
// grid (next video frame, t = 1); text runs continue 1-D positions. attention_mask is empty (every token attends)
// or holds 0/1 per token. InputError when runs and grids disagree (count or size), a grid is not divisible by the
// merge size, or no token attends.
MropePositions<int64_t> qwen3_vl_rope_index(const std::vector<int64_t>& input_ids, const Qwen3VlMedia& media,
                                            const Qwen3VlRopeOptions& options = {},
                                            const std::vector<int64_t>& attention_mask = {});

// Qwen3-Omni thinker ids and settings. Defaults are the released checkpoints' thinker_config (Qwen3 tokenizer:
// <|audio_pad|> 151675, <|audio_start|> 151669, <|vision_start|> 151652; position_id_per_seconds 13). The
// transformers 5.17 Qwen3OmniMoeThinkerConfig class defaults differ (audio 151646, audio_start 151647, 25 per
// second: Qwen2.5-Omni's) and set no vision_start_token_id.
struct Qwen3OmniRopeOptions {
  int64_t image_token_id = 151655;
  int64_t video_token_id = 151656;
  int64_t audio_token_id = 151675;
  int64_t vision_start_token_id = 151652;
  int64_t audio_start_token_id = 151669;
  int64_t spatial_merge_size = 2;
  double position_id_per_seconds = 13;
  bool use_audio_in_video = false;
};

struct Qwen3OmniMedia {
  std::vector<VisionGrid> images;             // image_grid_thw, in text order
  std::vector<VisionGrid> videos;             // video_grid_thw, in text order
  std::vector<double> video_second_per_grid;  // per video: temporal_patch_size / fps
  std::vector<int64_t> audio_feature_lengths;  // mel frames per audio block (audio-in-video included), text order
};

// Qwen3OmniMoe thinker get_rope_index for one sample, in float32 like transformers. Blocks are found from
// <|vision_start|> / <|audio_start|>: image t = k·position_id_per_seconds, video t = k·second_per_grid·
// position_id_per_seconds, audio tokens by audio_output_length, audio-in-video merges video and audio positions by
// temporal value. Without image and video grids the sample takes the text path (cumsum of the mask; masked tokens
// get 1 there, 0 otherwise), as transformers does even when audio is present. InputError on inconsistent input.
MropePositions<float> qwen3_omni_rope_index(const std::vector<int64_t>& input_ids, const Qwen3OmniMedia& media,
                                            const Qwen3OmniRopeOptions& options = {},
                                            const std::vector<int64_t>& attention_mask = {});

// The same options with the image/video(/audio) token ids replaced by VeOmni's -200/-300(/-400) placeholders,
// which VeOmni's transforms put into input_ids before computing positions; start tokens keep their real ids.
inline Qwen3VlRopeOptions with_veomni_placeholders(Qwen3VlRopeOptions options) {
  options.image_token_id = kImageInputIndex;
  options.video_token_id = kVideoInputIndex;
  return options;
}
inline Qwen3OmniRopeOptions with_veomni_placeholders(Qwen3OmniRopeOptions options) {
  options.image_token_id = kImageInputIndex;
  options.video_token_id = kVideoInputIndex;
  options.audio_token_id = kAudioInputIndex;
  return options;
}

}  // namespace veomni
