// Parsing and checking the stage file: a declarative schema for the keys, then the checks across keys.
#include "generate/speech_stages.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "io/json_file.h"
#include "io/yaml_config.h"

namespace veomni {

namespace {

#define VEOMNI_STAGE_FIELD(schema, path, ...) \
  schema.add(#path, [](auto& c) -> auto& { return c.path; }, __VA_ARGS__)

ConfigSchema<SpeechStages> speech_stage_schema() {
  ConfigSchema<SpeechStages> s;
  const ConfigFieldOptions devices{.choices = {"cpu", "cuda"}};
  VEOMNI_STAGE_FIELD(s, stages, "The stages that run, in order: [thinker] (text only), [thinker, talker] (codec codes in the output lines), [thinker, talker, code2wav] (WAV files under --audio-out).");
  VEOMNI_STAGE_FIELD(s, speaker, "The talker's voice: a name of talker_config.speaker_id (case does not matter).");
  VEOMNI_STAGE_FIELD(s, thinker.device, "cpu (f32) or cuda (bf16); --device given on the command line wins.", devices);
  VEOMNI_STAGE_FIELD(s, thinker.max_new_tokens, "Most tokens of the text reply; --max-new-tokens wins.");
  VEOMNI_STAGE_FIELD(s, thinker.temperature, "0: greedy; > 0 samples at it; --temperature wins.");
  VEOMNI_STAGE_FIELD(s, thinker.top_k, "Sampling keeps the k most likely tokens (0: all); --top-k wins.");
  VEOMNI_STAGE_FIELD(s, thinker.top_p, "Sampling keeps the most likely tokens whose mass reaches p; --top-p wins.");
  VEOMNI_STAGE_FIELD(s, thinker.repetition_penalty, "Penalty of tokens already seen (1: off); --repetition-penalty wins.");
  VEOMNI_STAGE_FIELD(s, thinker.seed, "Seed of the thinker's sampling streams; --seed wins.");
  VEOMNI_STAGE_FIELD(s, talker.device, "cpu (f32) or cuda (bf16).", devices);
  VEOMNI_STAGE_FIELD(s, talker.max_new_tokens, "Most codec frames (first-codebook tokens) per reply.");
  VEOMNI_STAGE_FIELD(s, talker.temperature, "First codebook: 0 greedy; > 0 samples at it.");
  VEOMNI_STAGE_FIELD(s, talker.top_k, "First codebook: sampling keeps the k most likely tokens (0: all).");
  VEOMNI_STAGE_FIELD(s, talker.top_p, "First codebook: sampling keeps the most likely tokens whose mass reaches p.");
  VEOMNI_STAGE_FIELD(s, talker.repetition_penalty, "First codebook: penalty of the codec tokens already generated (greedy too).");
  VEOMNI_STAGE_FIELD(s, talker.seed, "Seed of the talker's sampling streams (one per prompt index).");
  VEOMNI_STAGE_FIELD(s, talker.code_predictor.temperature, "Residual codebooks: 0 greedy; > 0 samples at it.");
  VEOMNI_STAGE_FIELD(s, talker.code_predictor.top_k, "Residual codebooks: sampling keeps the k most likely codes (0: all).");
  VEOMNI_STAGE_FIELD(s, talker.code_predictor.top_p, "Residual codebooks: sampling keeps the most likely codes whose mass reaches p.");
  VEOMNI_STAGE_FIELD(s, code2wav.device, "cpu (f32) or cuda (bf16).", devices);
  VEOMNI_STAGE_FIELD(s, code2wav.chunk_size, "Codec frames decoded at once.");
  VEOMNI_STAGE_FIELD(s, code2wav.left_context, "Frames before each chunk decoded with it for context, their samples dropped.");
  return s;
}

#undef VEOMNI_STAGE_FIELD

const ConfigSchema<SpeechStages>& schema() {
  static const ConfigSchema<SpeechStages> s = speech_stage_schema();
  return s;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

void check_stage_list(const SpeechStages& c, const std::string& source) {
  const std::vector<std::string>& known = speech_stage_names();
  for (const std::string& stage : c.stages)
    VEOMNI_INPUT_CHECK(std::find(known.begin(), known.end(), stage) != known.end(),
                       "{}: key 'stages': unknown stage '{}' (stages: {})", source, stage, joined(known));
  const bool chain = !c.stages.empty() && c.stages.size() <= known.size() &&
                     std::equal(c.stages.begin(), c.stages.end(), known.begin());
  VEOMNI_INPUT_CHECK(chain,
                     "{}: key 'stages': [{}] is not a chain that starts at the thinker: give [thinker], "
                     "[thinker, talker] or [thinker, talker, code2wav]",
                     source, joined(c.stages));
}

void check_sampling(double temperature, int64_t top_k, double top_p, double repetition_penalty,
                    const std::string& source, const std::string& section) {
  VEOMNI_INPUT_CHECK(std::isfinite(temperature) && temperature >= 0,
                     "{}: key '{}.temperature': {} must be >= 0 (0 decodes greedily)", source, section, temperature);
  VEOMNI_INPUT_CHECK(top_k >= 0, "{}: key '{}.top_k': {} must be >= 0 (0 keeps every token)", source, section, top_k);
  VEOMNI_INPUT_CHECK(std::isfinite(top_p) && top_p > 0 && top_p <= 1, "{}: key '{}.top_p': {} must be in (0, 1]",
                     source, section, top_p);
  VEOMNI_INPUT_CHECK(std::isfinite(repetition_penalty) && repetition_penalty > 0,
                     "{}: key '{}.repetition_penalty': {} must be > 0 (1: off)", source, section, repetition_penalty);
}

void check_values(const SpeechStages& c, const std::string& source) {
  check_stage_list(c, source);
  VEOMNI_INPUT_CHECK(!c.speaker.empty(), "{}: key 'speaker' must name a speaker of the talker config", source);
  const ThinkerStage& t = c.thinker;
  check_sampling(t.temperature, t.top_k, t.top_p, t.repetition_penalty, source, "thinker");
  VEOMNI_INPUT_CHECK(t.max_new_tokens >= 1, "{}: key 'thinker.max_new_tokens': {} must be >= 1", source,
                     t.max_new_tokens);
  VEOMNI_INPUT_CHECK(t.seed >= 0, "{}: key 'thinker.seed': {} must be >= 0", source, t.seed);
  const TalkerStage& k = c.talker;
  check_sampling(k.temperature, k.top_k, k.top_p, k.repetition_penalty, source, "talker");
  check_sampling(k.code_predictor.temperature, k.code_predictor.top_k, k.code_predictor.top_p, 1.0, source,
                 "talker.code_predictor");
  VEOMNI_INPUT_CHECK(k.max_new_tokens >= 1, "{}: key 'talker.max_new_tokens': {} must be >= 1", source,
                     k.max_new_tokens);
  VEOMNI_INPUT_CHECK(k.seed >= 0, "{}: key 'talker.seed': {} must be >= 0", source, k.seed);
  VEOMNI_INPUT_CHECK(c.code2wav.chunk_size >= 1, "{}: key 'code2wav.chunk_size': {} must be >= 1", source,
                     c.code2wav.chunk_size);
  VEOMNI_INPUT_CHECK(c.code2wav.left_context >= 0, "{}: key 'code2wav.left_context': {} must be >= 0", source,
                     c.code2wav.left_context);
}

}  // namespace

bool SpeechStages::runs(std::string_view stage) const {
  return std::find(stages.begin(), stages.end(), stage) != stages.end();
}

const std::vector<std::string>& speech_stage_names() {
  static const std::vector<std::string> names = {"thinker", "talker", "code2wav"};
  return names;
}

SpeechStages speech_stages_from_yaml(std::string_view text, const std::string& source, SpeechStages base) {
  schema().load_yaml(base, text, source);
  check_values(base, source);
  base.source = source;
  return base;
}

SpeechStages load_speech_stages(const std::string& path, SpeechStages base) {
  return speech_stages_from_yaml(read_text_file(path), path, std::move(base));
}

SamplingOptions thinker_sampling(const ThinkerStage& s) {
  return {.temperature = s.temperature, .top_k = s.top_k, .top_p = s.top_p,
          .repetition_penalty = s.repetition_penalty, .seed = static_cast<uint64_t>(s.seed)};
}

SamplingOptions talker_codec_sampling(const TalkerStage& s) {
  return {.temperature = s.temperature, .top_k = s.top_k, .top_p = s.top_p,
          .repetition_penalty = s.repetition_penalty, .seed = static_cast<uint64_t>(s.seed)};
}

SamplingOptions code_predictor_sampling(const CodePredictorStage& s) {
  return {.temperature = s.temperature, .top_k = s.top_k, .top_p = s.top_p};
}

std::string speech_stages_reference_yaml() { return schema().to_yaml(SpeechStages{}); }

}  // namespace veomni
