// How audio clips become convolution chunks, tokens and attention windows, as transformers computes them.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "model/audio/audio_encoder_config.h"

namespace veomni {

// Frames -> tokens of one chunk through three Conv2d(kernel 3, stride 2, padding 1): ((L-1)//2 + 1) three times.
int64_t audio_conv_output_length(int64_t frames);

struct AudioLayout {
  std::vector<int64_t> clip_frames;        // mel frames of each clip
  std::vector<int64_t> clip_tokens;        // tokens each clip yields (= audio_output_length(clip_frames[i]))
  std::vector<int64_t> chunk_frames;       // every clip is cut into chunks of 2*n_window frames, the last shorter
  std::vector<int64_t> chunk_first_frame;  // row of input_features where each chunk starts
  std::vector<int64_t> chunk_tokens;       // convolution output length of each chunk
  // Every chunk is zero-padded to the longest one before the convolutions, as transformers batches them; the
  // padding reaches the last real outputs of a shorter chunk through the kernels, so it is part of the result.
  int64_t padded_frames = 0;
  int64_t padded_tokens = 0;  // convolution output length of padded_frames
  // For each output token in order (clip, chunk, time), its row in the [chunks * padded_tokens] grid of
  // convolution outputs; row % padded_tokens is its position in the chunk (the sinusoid index).
  std::vector<int64_t> token_rows;
  // Attention windows over the tokens: each clip is cut into runs of padded_tokens * chunks_per_window tokens
  // (the batch's longest chunk sets the window, exactly as transformers does), the last run shorter.
  std::vector<int32_t> cu_seqlens;

  int64_t num_clips() const { return static_cast<int64_t>(clip_frames.size()); }
  int64_t num_chunks() const { return static_cast<int64_t>(chunk_frames.size()); }
  int64_t num_tokens() const { return static_cast<int64_t>(token_rows.size()); }
};

// The layout of clips of `feature_lengths` frames. A clip of zero or negative frames is an InputError naming it.
AudioLayout audio_layout(const std::vector<int64_t>& feature_lengths, const AudioEncoderConfig& config);

// The convolution input on the host: chunk c of input_features [frames, mel] (rows chunk_first_frame[c] ...)
// transposed into [c, 0, mel, time] of a zero-filled f32 [chunks, 1, mel, padded_frames] tensor.
Tensor audio_padded_chunks(const Tensor& input_features, const AudioLayout& layout);

// transformers' SinusoidsPositionEmbedding table [length, channels] (f32): row t is
// [sin(t * inv_k) for k < channels/2, cos(t * inv_k) for k < channels/2], inv_k = exp(-k * ln(10000)/(channels/2-1)),
// computed in f32 like torch.
Tensor audio_sinusoid_table(int64_t length, int64_t channels);

}  // namespace veomni
