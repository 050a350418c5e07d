// One packed micro-batch of a multimodal model (text slice, media masks, the micro-batch's pixels and mel features).
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "data/batch.h"
#include "data/mrope_positions.h"

namespace veomni {

struct MultimodalBatch {
  // input_ids i64 [S] with the media positions zeroed, target_ids (shifted, kIgnoreIndex where nothing is
  // predicted), position_ids [3, S] (i64 for Qwen3-VL, f32 for Qwen3-Omni), cu_seqlens. Under Ulysses SP this is
  // the rank's slice.
  Batch text;
  // bool [S] over the same rows as text; undefined means no such tokens. The image rows take the images' merged
  // embeddings in order, the video rows the videos'; the audio rows the audio encoder's output, clip after clip.
  Tensor image_mask, video_mask, audio_mask;
  // The media of the whole micro-batch (every SP rank encodes all of it). The first true entry of image_mask takes
  // merged image row image_row_begin, and so on: non-zero only for a later SP slice of a row.
  int64_t image_row_begin = 0, video_row_begin = 0, audio_row_begin = 0;
  Tensor pixel_values;  // [image patches, patch_dim], rows in the order of image_grids
  std::vector<VisionGrid> image_grids;
  Tensor pixel_values_videos;  // [video patches, patch_dim]
  std::vector<VisionGrid> video_grids;
  Tensor input_features;  // [sum(audio_feature_lengths), num_mel_bins] (Qwen3-Omni)
  std::vector<int64_t> audio_feature_lengths;

  // Data mixing (data.datasets): where each packed sample lies in the full (unsliced) packed row and which source it
  // came from, for the per-source loss. Empty when the run reads one dataset.
  struct SourceSpan {
    int64_t begin = 0, end = 0;  // rows [begin, end) of the full packed row
    int32_t source = 0;
  };
  std::vector<SourceSpan> source_spans;

  // True when text covers the whole packed row (no SP slice): then the masks must mark every encoder output row.
  bool whole_row() const {
    return text.sp_offset == 0 && (text.cu_seqlens.empty() || text.input_ids.numel() == text.cu_seqlens.back());
  }
};

}  // namespace veomni
