// Fuzz target: an audio file (WAV/FLAC/... headers through libsndfile) decoded to mono 16 kHz samples.
#include "fuzz_util.h"
#include "media/audio_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = veomni::fuzz::write_scratch_file("audio.wav", data, size);
  veomni::fuzz::expect_input_errors_only([&] { (void)veomni::decode_audio(path, 16000); });
  return 0;
}
