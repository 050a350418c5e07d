// The stage file of veomni-generate (--stages): which of Qwen3-Omni's stages run (thinker, talker, code2wav), the
// device of each, each one's sampling, and the speaker, in the spirit of vLLM-Omni's stage configs.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "generate/sampling.h"

namespace veomni {

struct ThinkerStage {
  std::string device = "cpu";
  int64_t max_new_tokens = 256;
  double temperature = 0.0;  // 0: greedy
  int64_t top_k = 0;
  double top_p = 1.0;
  double repetition_penalty = 1.0;
  int64_t seed = 0;
};

// The residual codebooks' sampling (transformers always samples the code predictor: top_k 50, top_p 0.8).
struct CodePredictorStage {
  double temperature = 1.0;  // 0: greedy
  int64_t top_k = 50;
  double top_p = 0.8;
};

// Defaults are transformers' Qwen3OmniMoeForConditionalGeneration.generate talker_* arguments.
struct TalkerStage {
  std::string device = "cpu";
  int64_t max_new_tokens = 4096;
  double temperature = 0.9;  // 0: greedy (talker_do_sample=False)
  int64_t top_k = 50;
  double top_p = 1.0;
  double repetition_penalty = 1.05;
  int64_t seed = 0;
  CodePredictorStage code_predictor;
};

struct Code2WavStage {
  std::string device = "cpu";
  int64_t chunk_size = 300;    // frames decoded at once (transformers' chunked_decode)
  int64_t left_context = 25;   // frames before each chunk decoded with it, their samples dropped
};

struct SpeechStages {
  std::vector<std::string> stages = {"thinker"};  // a prefix of thinker, talker, code2wav
  std::string speaker = "Ethan";                  // a name of the talker config's speaker_id (any case)
  ThinkerStage thinker;
  TalkerStage talker;
  Code2WavStage code2wav;
  std::string source;  // the stage file the values came from ("" for the defaults), for messages

  bool runs(std::string_view stage) const;
};

// The stage names, in the order they run.
const std::vector<std::string>& speech_stage_names();

// Parses stage YAML text over the defaults. InputError naming `source`, the key and its line for invalid YAML, an
// unknown key (with the closest known one), a value of the wrong type, an unknown device or stage, stages that are
// not thinker, thinker + talker or all three in that order, and sampling values out of range.
// `base` holds the values of the keys the text leaves out.
SpeechStages speech_stages_from_yaml(std::string_view text, const std::string& source, SpeechStages base = {});
SpeechStages load_speech_stages(const std::string& path, SpeechStages base = {});

// The sampling options of a stage section.
SamplingOptions thinker_sampling(const ThinkerStage& stage);
SamplingOptions talker_codec_sampling(const TalkerStage& stage);
SamplingOptions code_predictor_sampling(const CodePredictorStage& stage);

// Every key with its default value and help, as YAML (for the manual and tests).
std::string speech_stages_reference_yaml();

}  // namespace veomni
