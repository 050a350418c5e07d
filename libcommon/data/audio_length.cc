// The Qwen3-Omni audio output-length formula, with Python's floor division.
#include "data/audio_length.h"

#include "core/error.h"

namespace veomni {

namespace {

// Python's a // b for b > 0 (C++ division truncates towards zero instead).
int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && (a < 0)); }

}  // namespace

int64_t audio_output_length(int64_t mel_frames) {
  VEOMNI_INPUT_CHECK(mel_frames >= 0, "negative number of mel frames: {}", mel_frames);
  const int64_t leave = mel_frames % 100;
  const int64_t features = floor_div(leave - 1, 2) + 1;
  const int64_t remainder_tokens = floor_div(floor_div(features - 1, 2) + 1 - 1, 2) + 1;
  return remainder_tokens + (mel_frames / 100) * 13;
}

}  // namespace veomni
