// Audio decoding for multimodal preprocessing: any file libsndfile reads, as mono float samples at one rate.
#pragma once
#include <string>
#include <vector>

namespace veomni {

// Decodes WAV/FLAC/OGG (Vorbis, Opus)/MP3 and the other formats libsndfile 1.2 reads, as librosa.load(path,
// sr=target_rate, mono=True) does (HF's load_audio without torchcodec): float samples (PCM scaled to [-1, 1)),
// channels averaged, resampled with libsoxr at HQ quality (librosa's default res_type 'soxr_hq') and the length
// then fixed to ceil(frames · target_rate / file_rate). A file already at target_rate is returned unchanged.
// InputError naming the path: missing or unreadable, corrupt or unsupported format, no audio frames.
std::vector<float> decode_audio(const std::string& path, int target_rate = 16000);

}  // namespace veomni
