// Qwen3-Omni speaking: the talker and code2wav of a Qwen3OmniMoeForConditionalGeneration directory turn a
// conversation and the thinker's reply into codec codes and a 24 kHz waveform, as transformers' generate(...,
// return_audio=True) does after its thinker.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "generate/speech_stages.h"
#include "generate/talker_prompt.h"
#include "model/causal_lm.h"
#include "model/code2wav/code2wav.h"
#include "model/talker/talker.h"

namespace veomni {

// Whether a config.json (directory or file) holds the speech stages (a talker_config and a code2wav_config).
bool has_speech_stages(const std::string& model_dir);

class OmniSpeaker {
 public:
  static constexpr int kSampleRate = 24000;

  struct Speech {
    std::vector<int64_t> codes;  // [frames, num_code_groups] row-major
    int64_t frames = 0;
    bool reached_eos = false;  // the talker stopped at codec EOS (else at talker.max_new_tokens)
    std::vector<float> waveform;  // empty unless code2wav runs
  };

  // Loads the talker (and code2wav when stages.runs("code2wav")) of `model_dir` on their stage devices (f32).
  // InputError for a directory without the speech stages or their weights, or a speaker the talker lacks.
  OmniSpeaker(const std::string& model_dir, const SpeechStages& stages);
  OmniSpeaker(const OmniSpeaker&) = delete;
  OmniSpeaker& operator=(const OmniSpeaker&) = delete;

  const OmniSpeechIds& ids() const { return ids_; }
  const Talker& talker() const { return *talker_; }
  int64_t speaker_token() const { return speaker_token_; }

  // Speaks the reply of one prompt: thinker is the model that generated it (its token embeddings, and its accept
  // layer's hidden states where the user turns hold multimodal placeholders); index selects the prompt's random
  // stream (talker.seed); `where` names the prompt in errors.
  Speech speak(CausalLM& thinker, const std::vector<int64_t>& prompt, const std::vector<int64_t>& reply,
               int64_t index, const std::string& where) const;

  // The talker's inputs for one prompt (what speak() generates from).
  TalkerPrompt talker_prompt(CausalLM& thinker, const std::vector<int64_t>& prompt, const std::vector<int64_t>& reply,
                             const std::string& where) const;

 private:
  SpeechStages stages_;
  OmniSpeechIds ids_;
  std::unique_ptr<Talker> talker_;
  std::unique_ptr<Code2Wav> code2wav_;
  int64_t speaker_token_ = 0;
  bool thinker_mrope_ = true;
};

}  // namespace veomni
