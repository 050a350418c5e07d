// Audio encoding: mono float samples to a 16-bit PCM WAV file through libsndfile, written atomically.
#pragma once
#include <cstdint>
#include <span>
#include <string>

namespace veomni {

// The bytes of a mono 16-bit PCM WAV file of `samples` (in [-1, 1]; beyond is clipped) at `rate` Hz, as
// soundfile.write(path, samples, rate) writes one.
std::string encode_wav(std::span<const float> samples, int rate);

// encode_wav written to `path` under a temporary name, then renamed: an error leaves no file. InputError naming the
// path when it cannot be created.
void write_wav_file(const std::string& path, std::span<const float> samples, int rate);

}  // namespace veomni
