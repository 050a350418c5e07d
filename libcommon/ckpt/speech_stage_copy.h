// The speech stages of a Qwen3-Omni model (talker.* and code2wav.* tensors), which training does not touch, copied
// unchanged into a merged HuggingFace directory from the Omni model the run started from.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/hf_checkpoint.h"

namespace veomni {

class SpeechStageCopy {
 public:
  // hf_config_json: the checkpoint's whole config.json ("" for a text model). explicit_source: a HF directory or
  // .safetensors file given by the user (veomni-ckpt-merge --speech-from): it must hold talker.* or code2wav.*
  // tensors and the checkpoint must be a Qwen3-Omni one (InputError otherwise). Without it, base_path (the model
  // the run started from) is read when the checkpoint is a Qwen3-Omni model with audio output (enable_audio_output
  // absent or true); a base that is gone or unreadable is skipped with a warning (the merged model then holds the
  // thinker only), one without speech tensors silently.
  SpeechStageCopy(const std::string& hf_config_json, const std::string& explicit_source, const std::string& base_path);
  ~SpeechStageCopy();
  SpeechStageCopy(const SpeechStageCopy&) = delete;
  SpeechStageCopy& operator=(const SpeechStageCopy&) = delete;

  bool empty() const { return names_.empty(); }
  const std::string& source() const { return source_; }
  size_t size() const { return names_.size(); }
  // Declares every tensor (floating ones in `dtype`, others as stored), then writes them in that order.
  void declare(HfCheckpointWriter& writer, DType dtype) const;
  void write(HfCheckpointWriter& writer, DType dtype) const;

 private:
  void open(const std::string& path);

  std::string source_;
  std::unique_ptr<HfCheckpointReader> reader_;
  std::vector<std::string> names_;  // sorted
};

// True for the names of a Qwen3-Omni model's speech stages.
bool is_speech_stage_tensor(const std::string& name);

}  // namespace veomni
