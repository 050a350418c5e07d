// Chunking, token selection and attention windows of the Qwen3-Omni audio encoder, and its sinusoid table.
#include "model/audio/audio_layout.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "data/audio_length.h"

namespace veomni {

namespace {

// One stride-2, kernel-3, padding-1 convolution: (L + 2 - 3) / 2 + 1 for L >= 1.
int64_t halve(int64_t length) { return (length - 1) / 2 + 1; }

void add_chunks(AudioLayout& layout, int64_t clip_frames, int64_t first_frame, int64_t chunk_size) {
  for (int64_t offset = 0; offset < clip_frames; offset += chunk_size) {
    const int64_t frames = std::min(chunk_size, clip_frames - offset);
    layout.chunk_frames.push_back(frames);
    layout.chunk_first_frame.push_back(first_frame + offset);
    layout.chunk_tokens.push_back(audio_conv_output_length(frames));
  }
}

void add_windows(AudioLayout& layout, int64_t clip_tokens, int64_t window) {
  for (int64_t done = 0; done < clip_tokens; done += window) {
    const int64_t run = std::min(window, clip_tokens - done);
    layout.cu_seqlens.push_back(layout.cu_seqlens.back() + static_cast<int32_t>(run));
  }
}

}  // namespace

int64_t audio_conv_output_length(int64_t frames) {
  VEOMNI_CHECK(frames > 0, "convolution output length of {} frames", frames);
  return halve(halve(halve(frames)));
}

AudioLayout audio_layout(const std::vector<int64_t>& feature_lengths, const AudioEncoderConfig& config) {
  AudioLayout layout;
  layout.clip_frames = feature_lengths;
  int64_t first_frame = 0;
  for (size_t clip = 0; clip < feature_lengths.size(); ++clip) {
    const int64_t frames = feature_lengths[clip];
    VEOMNI_INPUT_CHECK(frames > 0, "audio clip {} has {} mel frames (audio_feature_lengths must be positive)", clip,
                       frames);
    const size_t first_chunk = layout.chunk_frames.size();
    add_chunks(layout, frames, first_frame, config.chunk_frames());
    int64_t tokens = 0;
    for (size_t c = first_chunk; c < layout.chunk_tokens.size(); ++c) tokens += layout.chunk_tokens[c];
    VEOMNI_CHECK(tokens == audio_output_length(frames), "clip {} of {} frames: {} tokens from the convolutions, {} "
                 "from the length formula", clip, frames, tokens, audio_output_length(frames));
    layout.clip_tokens.push_back(tokens);
    first_frame += frames;
  }
  if (layout.chunk_frames.empty()) {
    layout.cu_seqlens = {0};
    return layout;
  }
  layout.padded_frames = *std::max_element(layout.chunk_frames.begin(), layout.chunk_frames.end());
  layout.padded_tokens = audio_conv_output_length(layout.padded_frames);
  for (int64_t c = 0; c < layout.num_chunks(); ++c)
    for (int64_t t = 0; t < layout.chunk_tokens[static_cast<size_t>(c)]; ++t)
      layout.token_rows.push_back(c * layout.padded_tokens + t);
  const int64_t window = layout.padded_tokens * config.chunks_per_window();
  layout.cu_seqlens = {0};
  for (int64_t tokens : layout.clip_tokens) add_windows(layout, tokens, window);
  return layout;
}

Tensor audio_padded_chunks(const Tensor& input_features, const AudioLayout& layout) {
  const Tensor features = input_features.to(Device::cpu()).to_dtype(DType::F32);
  const int64_t mel = features.dim(1);
  Tensor padded = Tensor::zeros({layout.num_chunks(), 1, mel, layout.padded_frames}, DType::F32);
  const float* src = features.data<float>();
  float* dst = padded.data<float>();
  for (int64_t c = 0; c < layout.num_chunks(); ++c) {
    const size_t ci = static_cast<size_t>(c);
    float* chunk = dst + c * mel * layout.padded_frames;
    for (int64_t t = 0; t < layout.chunk_frames[ci]; ++t) {
      const float* frame = src + (layout.chunk_first_frame[ci] + t) * mel;
      for (int64_t m = 0; m < mel; ++m) chunk[m * layout.padded_frames + t] = frame[m];
    }
  }
  return padded;
}

Tensor audio_sinusoid_table(int64_t length, int64_t channels) {
  VEOMNI_CHECK(channels % 2 == 0 && channels >= 4, "sinusoid table of {} channels", channels);
  const int64_t half = channels / 2;
  // torch multiplies the f32 arange by the f64 increment as an f32 scalar, then takes exp and sin/cos in f32.
  const float increment = static_cast<float>(std::log(10000.0) / static_cast<double>(half - 1));
  std::vector<float> inv(static_cast<size_t>(half));
  for (int64_t k = 0; k < half; ++k) inv[static_cast<size_t>(k)] = std::exp(-increment * static_cast<float>(k));
  Tensor table = Tensor::empty({length, channels}, DType::F32);
  float* p = table.data<float>();
  for (int64_t t = 0; t < length; ++t) {
    for (int64_t k = 0; k < half; ++k) {
      const float angle = static_cast<float>(t) * inv[static_cast<size_t>(k)];
      p[t * channels + k] = std::sin(angle);
      p[t * channels + half + k] = std::cos(angle);
    }
  }
  return table;
}

}  // namespace veomni
