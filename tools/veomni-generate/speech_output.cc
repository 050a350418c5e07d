// Stage selection, the checks before loading anything, and the WAV files of veomni-generate's speaking.
#include "speech_output.h"

#include <filesystem>

#include "core/error.h"
#ifdef VEOMNI_HAVE_MEDIA
#include "media/audio_encode.h"
#endif

namespace veomni {

namespace fs = std::filesystem;

SpeechStages resolve_speech_stages(const std::string& stages_path, const std::string& audio_out,
                                   const std::string& model_dir) {
  SpeechStages stages;  // without a stages key: the thinker only, or every stage with --audio-out
  if (!audio_out.empty()) stages.stages = speech_stage_names();
  if (!stages_path.empty()) {
    VEOMNI_INPUT_CHECK(fs::is_regular_file(stages_path), "--stages {}: no such file", stages_path);
    stages = load_speech_stages(stages_path, stages);
    VEOMNI_INPUT_CHECK(!stages.runs("code2wav") || !audio_out.empty(),
                       "{}: key 'stages' runs code2wav, which writes WAV files: give --audio-out DIR", stages_path);
    VEOMNI_INPUT_CHECK(audio_out.empty() || stages.runs("code2wav"),
                       "--audio-out {}: the stages of {} stop before code2wav (add code2wav to its key 'stages')",
                       audio_out, stages_path);
  }
  if (!audio_out.empty()) {
#ifndef VEOMNI_HAVE_MEDIA
    throw InputError(fmt::format("--audio-out {}: this build has no libsndfile to write WAV files (it is built where "
                                 "the media libraries are found; see README)",
                                 audio_out));
#endif
    VEOMNI_INPUT_CHECK(!fs::exists(audio_out) || fs::is_directory(audio_out),
                       "--audio-out {}: exists and is not a directory", audio_out);
  }
  if (stages.runs("talker"))
    VEOMNI_INPUT_CHECK(has_speech_stages(model_dir),
                       "--model {}: no talker_config and code2wav_config in its config.json: this model cannot speak "
                       "(--audio-out and the talker stage need a whole Qwen3-Omni directory: thinker, talker, code2wav)",
                       model_dir);
  return stages;
}

std::string audio_path(const std::string& dir, int64_t index) {
  return (fs::path(dir) / (std::to_string(index) + ".wav")).string();
}

void write_audio_files(const std::string& dir, const std::vector<OmniSpeaker::Speech>& speech) {
#ifdef VEOMNI_HAVE_MEDIA
  std::error_code error;
  fs::create_directories(dir, error);
  VEOMNI_INPUT_CHECK(!error, "--audio-out {}: cannot create the directory: {}", dir, error.message());
  for (size_t i = 0; i < speech.size(); ++i)
    write_wav_file(audio_path(dir, static_cast<int64_t>(i)), speech[i].waveform, OmniSpeaker::kSampleRate);
#else
  VEOMNI_CHECK(speech.empty(), "{} waveforms to write in a build without libsndfile ({})", speech.size(), dir);
#endif
}

}  // namespace veomni
