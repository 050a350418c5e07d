// Whisper log-mel spectrogram (HF WhisperFeatureExtractor as Qwen3-Omni uses it): the audio model's input_features.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace veomni {

struct WhisperMelConfig {
  int sampling_rate = 16000;
  int n_fft = 400;
  int hop_length = 160;
  int n_mels = 128;
};

// Slaney-scale, Slaney-normalised triangular mel filters from 0 to 8000 Hz over n_fft/2 + 1 FFT bins at 0..sr/2
// (HF audio_utils mel_filter_bank(norm="slaney", mel_scale="slaney") as WhisperFeatureExtractor builds it,
// librosa.filters.mel's values at 16 kHz): row-major [n_mels][n_fft/2 + 1], in double precision.
std::vector<double> slaney_mel_filters(const WhisperMelConfig& config);

// Log-mel features of one clip, as HF computes them for a single unpadded clip: periodic Hann window, centred STFT
// with reflect padding, power spectrum, mel filters, last frame dropped, log10(max(x, 1e-10)), clamped to the clip's
// maximum - 8, then (x + 4) / 4. Returns f32 [frames, n_mels] with frames = floor(samples / hop_length).
// InputError when the clip is too short for the reflect padding (n_fft/2 samples or fewer) or the config is invalid.
Tensor whisper_log_mel(const std::vector<float>& samples, const WhisperMelConfig& config = {});

}  // namespace veomni
