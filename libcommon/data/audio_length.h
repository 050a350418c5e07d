// Qwen3-Omni audio token count for a clip of mel frames (the audio encoder's output length).
#pragma once
#include <cstdint>

namespace veomni {

// Tokens the Qwen3-Omni audio tower emits for `mel_frames` frames (VeOmni's _get_feat_extract_output_lengths):
// with r = L % 100, f = (r-1)//2 + 1, tokens = ((f-1)//2 + 1 - 1)//2 + 1 + (L//100)*13 in floor division, so
// every full 100 frames give 13 tokens and r = 0 adds none. 800 -> 104, 400 -> 52, 1 -> 1. InputError if L < 0.
int64_t audio_output_length(int64_t mel_frames);

}  // namespace veomni
