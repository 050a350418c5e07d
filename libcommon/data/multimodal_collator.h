// Packs Qwen3-VL / Qwen3-Omni samples (VeOmni's stored keys) into one MultimodalBatch: text as the text collator
// packs it, the masks alongside, the media of every sample concatenated, and the Ulysses slice of the token rows.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "data/sample.h"
#include "model/thinker/multimodal_batch.h"

namespace veomni {

struct MultimodalCollateOptions {
  int64_t max_seq_len = 2048;  // a longer sample is an InputError (its media cannot be cut with its tokens)
  int64_t sp_size = 1;         // the packed row is padded to a multiple of sp_size and this rank's slice kept
  int64_t sp_rank = 0;
  int64_t merge_unit = 4;      // patches per merged visual token (spatial_merge_size^2)
  bool has_audio = false;      // the model has an audio encoder (Qwen3-Omni): audio keys are read
  DType position_dtype = DType::I64;  // of position_ids [3, S]: i64 (Qwen3-VL) or f32 (Qwen3-Omni)
  int64_t vocab_size = 0;  // > 0: input ids and labels (but kIgnoreIndex) must lie in [0, vocab_size)
};

// One stored sample and the name errors use for it ("train.h5 sample 12").
struct NamedSample {
  const Sample* sample = nullptr;
  std::string context;
};

// Keys: input_ids, labels (default input_ids), position_ids [3, L] (default arange), image_mask / video_mask /
// audio_mask (bool or u8 [L]; absent = none), pixel_values + image_grid_thw, pixel_values_videos + video_grid_thw,
// input_features + audio_feature_lengths; and the preference and rollout keys as the text collator reads them
// (read_objective_keys; the pair's roles, token_values and sequence_values land in the batch's text). Each sample must be consistent on its own (mask counts equal to the
// grids' merged patches and the clips' audio tokens, pixel and feature rows equal to the grids and lengths, masks
// disjoint): otherwise an InputError naming the sample's context and the keys. A multimodal preference pair (man
// veomni-data, PREFERENCE PAIRS) holds its prompt's media once per half, the chosen half's items first: its
// positions must restart at 0 at chosen_length in every stream, and no image, video or audio clip may straddle the
// two sequences.

MultimodalBatch collate_multimodal(const std::vector<NamedSample>& samples, const MultimodalCollateOptions& options);

}  // namespace veomni
