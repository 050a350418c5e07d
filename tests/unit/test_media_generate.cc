// Generation from prompts with media (issue #21) on the thinker toys of tests/fixtures/thinker/models: an image
// prompt (Qwen3-VL) and an image and an audio prompt (Qwen3-Omni thinker), preprocessed by veomni-preprocess
// multimodal's code and batched with a text prompt, generate through the KV cache the greedy ids of a loop without
// cache that re-runs the whole multimodal forward over the sequence each step (positions after the prompt's largest),
// with the same logits (1e-4).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "data/constants.h"
#include "media/multimodal_media.h"
#include "media/multimodal_sample.h"
#include "tests/common/generate_media_check.h"
#include "tests/common/scratch_dir.h"

using namespace veomni;

namespace {

const std::string kMedia = std::string(VEOMNI_FIXTURES_DIR) + "/media/inputs/";
constexpr int64_t kGeneratedTokens = 5;

// The toys' special ids (their config.json) in the layout veomni-preprocess writes.
MultimodalTokenIds toy_token_ids() {
  MultimodalTokenIds ids;
  ids.im_start = 1, ids.im_end = 2, ids.newline = 3;
  ids.vision_start = veomni::testing::kToyVisionStart, ids.vision_end = veomni::testing::kToyVisionEnd;
  ids.image_pad = 250, ids.video_pad = 251;
  ids.audio_start = veomni::testing::kToyAudioStart, ids.audio_end = veomni::testing::kToyAudioEnd;
  ids.audio_pad = 254;
  return ids;
}

// text, then the media part in its block (as MultimodalTemplate lays it out), then more text; the sample as
// veomni-preprocess multimodal builds it.
Sample media_sample(PartKind kind, const std::string& file, const std::vector<int64_t>& before,
                    const std::vector<int64_t>& after, const MultimodalMediaConfig& config) {
  const MultimodalTokenIds ids = toy_token_ids();
  std::vector<ProcessedMedia> media = {process_media({kind, kMedia + file}, config)};
  const MediaExtent extent = media_extent(media.front(), config);
  MultimodalTokens tokens;
  tokens.ids = before;
  const bool audio = kind == PartKind::Audio;
  tokens.ids.push_back(audio ? ids.audio_start : ids.vision_start);
  tokens.ids.insert(tokens.ids.end(), static_cast<size_t>(extent.tokens), audio ? kAudioInputIndex : kImageInputIndex);
  tokens.ids.push_back(audio ? ids.audio_end : ids.vision_end);
  tokens.ids.insert(tokens.ids.end(), after.begin(), after.end());
  tokens.trained.assign(tokens.ids.size(), 0);
  return build_multimodal_sample(tokens, media, ids, config);
}

class MediaGenerate : public veomni::testing::ScratchDir {};

TEST_F(MediaGenerate, Qwen3VlImagePromptMatchesNoCacheLoop) {
  const MultimodalMediaConfig config = default_media_config(MultimodalModel::Qwen3VL);
  const std::vector<std::optional<Sample>> samples = {
      media_sample(PartKind::Image, "image_rgb_48x64.png", {5, 17, 30}, {92, 6}, config), std::nullopt,
      media_sample(PartKind::Image, "image_photo_100x300.jpg", {44}, {7, 8, 9, 10, 11, 12, 13}, config)};
  veomni::testing::expect_cached_generation_matches_full_forward(
      "qwen3_vl_toy", path("model"), samples, {{}, {3, 14, 15, 92, 6, 71, 82}, {}}, kGeneratedTokens);
}

TEST_F(MediaGenerate, Qwen3OmniThinkerImageAndAudioPromptsMatchNoCacheLoop) {
  const MultimodalMediaConfig config = default_media_config(MultimodalModel::Qwen3OmniMoe);
  const std::vector<std::optional<Sample>> samples = {
      media_sample(PartKind::Audio, "audio_speech_16k_mono.wav", {5, 17}, {92, 6, 8}, config), std::nullopt,
      media_sample(PartKind::Image, "image_rgb_48x64.png", {44, 45, 46}, {7}, config)};
  veomni::testing::expect_cached_generation_matches_full_forward("qwen3_omni_moe_toy", path("model"), samples,
                                                                 {{}, {3, 14, 15}, {}}, kGeneratedTokens);
}

}  // namespace
