// veomni-generate's speaking: which stages run (the stage file and --audio-out), the checks before any work, and
// the WAV file of each prompt.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "generate/omni_speaker.h"
#include "generate/speech_stages.h"

namespace veomni {

// The stage file's settings over the defaults; its stages, or without that key [thinker] (all three with
// --audio-out). InputError when code2wav runs
// without --audio-out, --audio-out is given while code2wav does not run, --audio-out names a file, the model
// cannot speak (no talker_config/code2wav_config) while the talker runs, or the build cannot write WAV files.
SpeechStages resolve_speech_stages(const std::string& stages_path, const std::string& audio_out,
                                   const std::string& model_dir);

// The WAV file of prompt `index` under `dir`: DIR/<index>.wav.
std::string audio_path(const std::string& dir, int64_t index);

// Writes every prompt's waveform (24 kHz mono 16-bit PCM), creating dir; each file atomically.
void write_audio_files(const std::string& dir, const std::vector<OmniSpeaker::Speech>& speech);

}  // namespace veomni
