// One multimodal conversation to its stored dataset sample: tokens, labels, masks, M-RoPE positions, media tensors.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/sample.h"
#include "data/tokenizer.h"
#include "media/multimodal_media.h"
#include "media/multimodal_tokens.h"

namespace veomni {

// The sample of tokens (placeholders at media positions) and their processed media in text order. Every sample of
// a model has the same keys, media absent or not (empty arrays then), so a dataset's schema is fixed:
//   input_ids, labels, attention_mask  i64 [L]      (media ids zeroed; labels -100 except trained tokens)
//   position_ids                       i64 [3, L]   Qwen3-VL get_rope_index; f32 for Qwen3-Omni's thinker
//   image_mask, video_mask             bool [L]
//   pixel_values, pixel_values_videos  f32 [N, 3·temporal·patch²]
//   image_grid_thw, video_grid_thw     i64 [n, 3]
// and for Qwen3-Omni also audio_mask bool [L], input_features f32 [F, n_mels], audio_feature_lengths i64 [k].
// Positions are computed on the ids holding the placeholders (VeOmni's order), then the masks, then the zeroing.
Sample build_multimodal_sample(const MultimodalTokens& tokens, const std::vector<ProcessedMedia>& media,
                               const MultimodalTokenIds& ids, const MultimodalMediaConfig& config);

struct EncodedMultimodal {
  Sample sample;
  int64_t length = 0;
  int64_t trained = 0;
  int64_t images = 0, videos = 0, audio_clips = 0;
};

// Record -> sample: parse_multimodal_record, process_media of each part, MultimodalTemplate::encode,
// build_multimodal_sample. Thread-safe. InputError for a bad record or media file (naming the message, part and
// path).
class MultimodalEncoder {
 public:
  MultimodalEncoder(const Tokenizer& tokenizer, MultimodalMediaConfig config,
                    std::optional<std::string> system_prompt = {});

  // Relative media paths are resolved against media_dir. With `rendering` (the record through the model's chat
  // template) the tokens come from MultimodalTemplate::encode_rendering instead of our ChatML. generation_prompt
  // opens the assistant's turn after the ChatML messages (a prompt for veomni-generate; not with a rendering).
  EncodedMultimodal encode(const nlohmann::json& record, const std::string& media_dir,
                           const ModelRendering* rendering = nullptr, bool generation_prompt = false) const;

  const MultimodalTemplate& chat() const { return chat_; }
  const MultimodalMediaConfig& config() const { return config_; }

 private:
  MultimodalTemplate chat_;
  MultimodalMediaConfig config_;
  std::optional<std::string> system_prompt_;
};

}  // namespace veomni
