// Loading Qwen3-Omni's speech stages and running them on one prompt: thinker rows -> talker prompt -> codec codes
// -> waveform.
#include "generate/omni_speaker.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <numeric>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/batch.h"
#include "io/json_file.h"
#include "kernels/backend.h"
#include "model/talker/talker_config.h"
#include "model/weight_source.h"

namespace veomni {

namespace fs = std::filesystem;

namespace {

std::string config_path_of(const std::string& model_dir) {
  return fs::is_directory(model_dir) ? (fs::path(model_dir) / "config.json").string() : model_dir;
}

SpeechModelOptions stage_options(const std::string& device, const std::string& stage) {
  SpeechModelOptions options;  // f32 on either device: the speech stages are small next to the thinker
  if (device == "cuda") {
    VEOMNI_INPUT_CHECK(backend::cuda_device_count() > 0, "stage {}: device cuda: {} (hint: device: cpu)", stage,
                       backend::cuda_built() ? "no GPU is visible" : "this build has no CUDA backend");
    options.device = Device::cuda(0);
  }
  return options;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

int64_t speaker_token_of(const TalkerConfig& config, const SpeechStages& stages, const std::string& config_path) {
  const auto it = config.speaker_id.find(lower(stages.speaker));
  std::string known;
  for (const auto& [name, id] : config.speaker_id) known += (known.empty() ? "" : ", ") + name;
  VEOMNI_INPUT_CHECK(it != config.speaker_id.end(),
                     "{}: key 'speaker': speaker '{}' is not in talker_config.speaker_id of {} (speakers: {})",
                     stages.source.empty() ? "the default stages" : stages.source, stages.speaker, config_path,
                     known.empty() ? "none" : known);
  return it->second;
}

Device device_of(CausalLM& model) {
  for (const auto& p : model.params().all())
    if (p->value.defined()) return p->value.device();
  return Device::cpu();
}

// The thinker's token embeddings of ids, as f32 rows on `device`.
Tensor thinker_embeddings(CausalLM& thinker, const std::vector<int64_t>& ids, Device device) {
  const auto n = static_cast<int64_t>(ids.size());
  const Tensor rows = thinker.body().embed_tokens(Tensor::from_vector(ids, {n}).to(device_of(thinker)));
  return rows.to_dtype(DType::F32).to(device);
}

// transformers' hidden_states[layer] of the thinker over ids (text positions): the token embeddings for 0, the
// output of decoder layer `layer` - 1 otherwise; f32 rows on `device`.
Tensor thinker_hidden_states(CausalLM& thinker, const std::vector<int64_t>& ids, int64_t layer, bool mrope,
                             Device device) {
  const int64_t layers = thinker.config().num_hidden_layers;
  VEOMNI_INPUT_CHECK(layer >= 0 && layer < layers,
                     "talker_config.accept_hidden_layer {} must be in [0, {}) (the thinker's decoder layers) to speak "
                     "prompts with multimodal placeholders",
                     layer, layers);
  const auto n = static_cast<int64_t>(ids.size());
  const Device on = device_of(thinker);
  const Tensor embeds = thinker.body().embed_tokens(Tensor::from_vector(ids, {n}).to(on));
  if (layer == 0) return embeds.to_dtype(DType::F32).to(device);
  std::vector<int64_t> positions(static_cast<size_t>(n));
  std::iota(positions.begin(), positions.end(), int64_t{0});
  std::vector<int64_t> streams;
  for (int i = 0; i < (mrope ? 3 : 1); ++i) streams.insert(streams.end(), positions.begin(), positions.end());
  Batch batch;
  batch.input_ids = Tensor::from_vector(ids, {n}).to(on);
  batch.target_ids = Tensor::from_vector(std::vector<int64_t>(static_cast<size_t>(n), kIgnoreIndex), {n}).to(on);
  batch.position_ids = mrope ? Tensor::from_vector(streams, {3, n}) : Tensor::from_vector(streams, {n});
  batch.cu_seqlens = {0, static_cast<int32_t>(n)};
  Tensor captured;
  thinker.body().forward_embeds(batch, embeds, [&](size_t i, Tensor& h) {
    if (static_cast<int64_t>(i) == layer - 1) captured = h.clone();
  }, false);
  return captured.to_dtype(DType::F32).to(device);
}

}  // namespace

bool has_speech_stages(const std::string& model_dir) {
  const std::string path = config_path_of(model_dir);
  if (!fs::exists(path)) return false;
  const nlohmann::json config = read_json_file(path);
  return config.is_object() && config.contains("talker_config") && config["talker_config"].is_object() &&
         config.contains("code2wav_config") && config["code2wav_config"].is_object();
}

OmniSpeaker::OmniSpeaker(const std::string& model_dir, const SpeechStages& stages) : stages_(stages) {
  const std::string path = config_path_of(model_dir);
  VEOMNI_INPUT_CHECK(has_speech_stages(model_dir),
                     "{}: no talker_config and code2wav_config: this model cannot speak (speaking needs a whole "
                     "Qwen3OmniMoeForConditionalGeneration directory: thinker, talker and code2wav)",
                     path);
  const nlohmann::json config = read_json_file(path);
  ids_ = omni_speech_ids_from_json(config, path);
  const TalkerConfig talker_config = load_talker_config(path);
  speaker_token_ = speaker_token_of(talker_config, stages, path);
  const HfCheckpointSource source(fs::is_directory(model_dir) ? model_dir : fs::path(model_dir).parent_path().string());
  talker_ = std::make_unique<Talker>(talker_config, stage_options(stages.talker.device, "talker"));
  talker_->load(source);
  if (stages.runs("code2wav")) {
    code2wav_ = std::make_unique<Code2Wav>(load_code2wav_config(path), stage_options(stages.code2wav.device, "code2wav"));
    code2wav_->load(source);
  }
}

TalkerPrompt OmniSpeaker::talker_prompt(CausalLM& thinker, const std::vector<int64_t>& prompt,
                                        const std::vector<int64_t>& reply, const std::string& where) const {
  const Device device = stage_options(stages_.talker.device, "talker").device;
  std::vector<int64_t> rows = prompt;  // transformers has no hidden state for the reply's last token
  rows.insert(rows.end(), reply.begin(), reply.end());
  if (!rows.empty()) rows.pop_back();
  const Tensor embeds = thinker_embeddings(thinker, rows, device);
  const Tensor hidden = user_turns_hold_multimodal(ids_, prompt)
                            ? thinker_hidden_states(thinker, rows, talker_->config().accept_hidden_layer,
                                                    thinker_mrope_, device)
                            : Tensor();
  const Tensor special = thinker_embeddings(thinker, {ids_.tts_bos, ids_.tts_eos, ids_.tts_pad}, device);
  return build_talker_prompt(*talker_, ids_, speaker_token_, prompt, reply, embeds, hidden, special, where);
}

OmniSpeaker::Speech OmniSpeaker::speak(CausalLM& thinker, const std::vector<int64_t>& prompt,
                                       const std::vector<int64_t>& reply, int64_t index,
                                       const std::string& where) const {
  const TalkerPrompt in = talker_prompt(thinker, prompt, reply, where);
  TalkerSampling sampling;
  sampling.codec = talker_codec_sampling(stages_.talker);
  sampling.residual = code_predictor_sampling(stages_.talker.code_predictor);
  RandomStream random(static_cast<uint64_t>(stages_.talker.seed), static_cast<uint64_t>(index));
  const Talker::Generation g =
      talker_->generate(in.prefill, in.trailing_text, in.tts_pad, stages_.talker.max_new_tokens, sampling, random);
  Speech out;
  out.codes = g.codes;
  out.frames = g.frames;
  out.reached_eos = g.reached_eos;
  if (code2wav_) {
    if (g.frames == 0)
      throw Error(fmt::format("{}: the talker stopped before its first codec frame: nothing to decode (hint: a "
                              "larger talker.max_new_tokens in the stage file)",
                              where));
    out.waveform = code2wav_->chunked_decode(g.codes, stages_.code2wav.chunk_size, stages_.code2wav.left_context);
  }
  return out;
}

}  // namespace veomni
