// Synthetic datasets with VeOmni's dummy shapes and layouts (text, Qwen2-VL, Qwen3-VL, Qwen3-Omni), preference
// pairs and rollouts.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/dataset_format.h"
#include "data/sample.h"

namespace veomni {

enum class DummyType { Text, Qwen2VL, Qwen3VL, Qwen3Omni, Preference, Rollout };

// "text", "qwen2vl", "qwen3vl", "qwen3omni", "preference", "rollout"; InputError for other names.
DummyType dummy_type_from_name(std::string_view name);
const char* dummy_type_name(DummyType type);

// Where each modality sits in every sample of a dummy dataset (all samples share it). Follows VeOmni's
// dummy_dataset.py: tokens are text except these runs.
struct DummyLayout {
  DummyType type = DummyType::Text;
  int64_t seq_len = 0;  // requested --seq-len
  int64_t length = 0;   // L, tokens per sample
  int64_t text_tokens = 0;
  int64_t image_begin = 0, image_tokens = 0;
  int64_t audio_begin = 0, audio_tokens = 0;
  int64_t video_begin = 0, video_tokens = 0;
  int64_t patch_dim = 0;                            // 3 channels * temporal patch 2 * patch² (0 for text)
  std::vector<std::array<int64_t, 3>> image_grids;  // (t, h, w) in patches
  std::vector<std::array<int64_t, 3>> video_grids;
  std::vector<int64_t> audio_clip_frames;  // mel frames per audio clip
  // Preference: the pair's chosen sequence has chosen_tokens (the rejected one length - chosen_tokens), each starting
  // with the same prompt_tokens. Rollout: prompt_tokens, then the response.
  int64_t prompt_tokens = 0;
  int64_t chosen_tokens = 0;
  bool ref_logps = false;  // preference: add ref_chosen_logps / ref_rejected_logps
  // Preference: Text, or Qwen3VL / Qwen3Omni for a multimodal pair. Each half then holds the whole prompt (text,
  // images, audio, video, in that order) and its answer; the media runs, grids, clips and *_begin above describe
  // one half (the sample holds them twice) and image_tokens, audio_tokens, video_tokens count both halves.
  DummyType media = DummyType::Text;

  // The dataset kind of the format header: text, vl or omni.
  const char* dataset_kind() const;
};

// The most samples one dummy dataset may have (with kMaxSampleTokens each, the token count stays in 64 bits).
inline constexpr int64_t kMaxDummySamples = int64_t{1} << 36;

// InputError when seq_len is outside [1, kMaxSampleTokens] or leaves no room for the multimodal runs (qwen*vl needs
// 48, qwen3omni 248), the pair (preference needs 4: a prompt and an answer token on each side) or the rollout's
// prompt and response (2). `media` (Qwen3VL or Qwen3Omni, with type Preference only) makes the pairs multimodal:
// each half needs its media tokens (48, or 152 with audio) and 2 more.
DummyLayout dummy_layout(DummyType type, int64_t seq_len, DummyType media = DummyType::Text);

// Sample `index` of the dataset; a function of (layout, seed, index) only, so shards can be made in any order.
// Keys: input_ids, labels (= input_ids with labels[0] = -100), attention_mask (ones), position_ids (arange; (3, L)
// for VL/Omni), all i64; VL adds pixel_values, pixel_values_videos (f32 uniform [0, 1)), image_grid_thw,
// video_grid_thw (i64), image_mask, video_mask (bool); Omni adds input_features (f32 [0, 1)),
// audio_feature_lengths (i64), audio_mask (bool). Preference (man veomni-data): a pair of seq_len tokens, chosen
// (seq_len / 2 tokens) then rejected, each a shared prompt (labels -100) and its own answer; position_ids restart at
// the rejected; chosen_length i64 [1]; with ref_logps also ref_chosen_logps, ref_rejected_logps f32 [1] (negative).
// A multimodal pair adds its family's keys with the prompt's media twice (the chosen half's, then the same again
// for the rejected half), ids 0 on media tokens, and position_ids (3, L) restarting at 0 in every stream.
// Rollout: a prompt of seq_len / 2 tokens (labels -100) and the response, with the f32 [L] keys returns, old_values,
// advantages (uniform in [-1, 1)), old_log_probs, ref_log_probs (in (-4, 0]), 0 on the prompt.
Sample make_dummy_sample(const DummyLayout& layout, uint64_t seed, int64_t index);

struct DummyDatasetOptions {
  DummyType type = DummyType::Text;
  int64_t seq_len = 0;
  int64_t num_samples = 0;
  int64_t num_shards = 1;
  uint64_t seed = 0;
  bool ref_logps = false;  // preference only
  DummyType media = DummyType::Text;  // preference or rollout: Qwen3VL or Qwen3Omni for multimodal samples
  std::string out;  // file path; with several shards "<out without .h5>-NNNNN-of-MMMMM.h5"
  int compression_level = 1;
};

struct DummyDatasetSummary {
  DummyLayout layout;
  int64_t num_samples = 0;
  int64_t tokens = 0;
  uint64_t bytes = 0;  // on disk, all files
  std::vector<std::string> files;
  Sample first_sample;  // sample 0 (empty when no samples)
};

// Writes the dataset (streaming, logging progress every few seconds) and returns what was written.
DummyDatasetSummary write_dummy_dataset(const DummyDatasetOptions& options);

}  // namespace veomni
