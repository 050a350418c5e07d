// Loading the model to generate with: an HF directory through the HF loader, or a checkpoint's full f32 masters
// through the checkpoint reader (any parallel layout), converted to the compute dtype on the device.
#include "generate/generation_model.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint_dir.h"
#include "ckpt/checkpoint_reader.h"
#include "core/error.h"
#include "io/json_file.h"
#include "model/hf_loader.h"
#include "model/thinker/thinker_config.h"
#include "model/weight_source.h"
#include "train/score_weights.h"
#include "train/train_model.h"

namespace veomni {

namespace fs = std::filesystem;

std::vector<int64_t> eos_token_ids_of(const nlohmann::json& json, const std::string& source) {
  if (!json.is_object() || !json.contains("eos_token_id") || json["eos_token_id"].is_null()) return {};
  const nlohmann::json& eos = json["eos_token_id"];
  if (eos.is_number_integer()) return {eos.get<int64_t>()};
  VEOMNI_INPUT_CHECK(eos.is_array(), "{}: key 'eos_token_id' must be an integer or a list of integers, got {}", source,
                     eos.dump());
  std::vector<int64_t> ids;
  for (const nlohmann::json& id : eos) {
    VEOMNI_INPUT_CHECK(id.is_number_integer(), "{}: key 'eos_token_id' must hold integers, got {}", source, eos.dump());
    ids.push_back(id.get<int64_t>());
  }
  return ids;
}

namespace {

// generation_config.json's eos ids where the directory has one (transformers' generate reads it), else config's.
std::vector<int64_t> directory_eos_ids(const std::string& dir, const ModelConfig& config) {
  const std::string generation_config = dir + "/generation_config.json";
  if (fs::exists(generation_config)) {
    std::vector<int64_t> ids = eos_token_ids_of(read_json_file(generation_config), generation_config);
    if (!ids.empty()) return ids;
  }
  if (config.extra_json.empty()) return {};
  return eos_token_ids_of(nlohmann::json::parse(config.extra_json), dir + "/config.json");
}

std::unique_ptr<CausalLM> empty_model(const ModelConfig& config, Device device, ModelOptions options = {}) {
  options.device = device;
  options.compute_dtype = device.is_cuda() ? DType::BF16 : DType::F32;
  return std::make_unique<CausalLM>(config, options);
}

// A multimodal model's language model under its own names (model.language_model.*, thinker.*) with M-RoPE; the
// towers' tensors are not read.
GenerationModel multimodal_language_model(const std::string& dir, Device device) {
  const ThinkerConfig thinker = load_thinker_config(dir);
  GenerationModel out;
  out.config = thinker.text;
  out.model_type = thinker.model_type;
  ModelOptions options;
  options.param_prefix = thinker.text_prefix;
  options.lm_head_name = thinker.lm_head_name;
  options.mrope_section = thinker.mrope_section;
  out.model = empty_model(out.config, device, options);
  out.mrope = true;
  return out;
}

// The media encoders of a multimodal directory over the loaded language model: the towers' tensors read, the token
// embedding shared; the other language-model parameters stay unmaterialised (no second copy).
std::unique_ptr<MultimodalLM> media_encoders(const std::string& dir, CausalLM& language_model) {
  const ThinkerConfig thinker = load_thinker_config(dir);
  const HeadSite site = language_model.body().head_site();
  MultimodalOptions options;
  options.lm.device = site.device;
  options.lm.compute_dtype = site.compute_dtype;
  options.lm.materialize = false;
  auto out = std::make_unique<MultimodalLM>(thinker, options);
  const std::string embedding = thinker.text_prefix + "embed_tokens.weight";
  const HfCheckpointSource source(dir);
  for (const std::unique_ptr<Parameter>& param : out->params().all()) {
    const Parameter* text = language_model.params().find(param->name);
    if (text != nullptr) {
      if (param->name == embedding) param->value = text->value;
      continue;
    }
    param->value = read_hf_parameter(source, *param, options.lm.compute_dtype).to(site.device);
  }
  return out;
}

GenerationModel load_hf_directory(const std::string& dir, Device device) {
  GenerationModel out;
  std::string lm_head = "lm_head.weight";
  if (is_multimodal_config(dir)) {
    out = multimodal_language_model(dir, device);
    lm_head = load_thinker_config(dir).lm_head_name;
  } else {
    out.config = load_model_config(dir);
    out.model_type = out.config.model_type;
    out.model = empty_model(out.config, device);
  }
  const HfCheckpointSource source(dir);
  VEOMNI_INPUT_CHECK(source.contains(lm_head) || out.config.tie_word_embeddings,
                     "{}: no {}: not a causal LM (a reward or value model has no LM head)", dir, lm_head);
  load_hf_weights(out.model->params(), source);
  if (out.mrope) out.multimodal_type = load_thinker_config(dir).model_type;
  out.hf_directory = dir;
  out.source = "HF directory " + dir;
  out.tokenizer_dir = dir;
  out.eos_token_ids = directory_eos_ids(dir, out.config);
  return out;
}

GenerationModel load_checkpoint(const std::string& path, Device device) {
  const std::string dir = resolve_checkpoint_path(path);
  GenerationModel out;
  out.config = checkpoint_text_model(dir, ModelHead::LanguageModel);
  out.model_type = out.config.model_type;
  CheckpointReader reader(dir);
  reader.require_full_model("generating text with veomni-generate");
  out.model = empty_model(out.config, device);
  for (const std::unique_ptr<Parameter>& param : out.model->params().all()) {
    if (!param->value.defined()) continue;
    const size_t index = reader.param_index(param->name);
    VEOMNI_INPUT_CHECK(reader.metadata().params[index].shape == param->shape,
                       "{}: parameter {} is {} in the checkpoint but {} in its model config", dir, param->name,
                       shape_str(reader.metadata().params[index].shape), shape_str(param->shape));
    param->value.copy_from(reader.read_full(index, ShardField::Master).to_dtype(param->value.dtype()));
    reader.close_files();
  }
  out.source = "checkpoint " + dir;
  const std::string tokenizer = reader.metadata().tokenizer_path;
  out.tokenizer_dir = tokenizer.empty() ? dir : tokenizer;
  out.eos_token_ids = directory_eos_ids(dir, out.config);
  return out;
}

}  // namespace

void load_media_encoders(GenerationModel& model) {
  if (model.multimodal) return;
  VEOMNI_INPUT_CHECK(!model.multimodal_type.empty(),
                     "the model ({}, {}) has no media encoders: image, video and audio need a Qwen3-VL, "
                     "Qwen3-VL-MoE or Qwen3-Omni HF directory",
                     model.model_type, model.source);
  model.multimodal = media_encoders(model.hf_directory, *model.model);
}

GenerationModel load_generation_model(const std::string& path, Device device) {
  VEOMNI_INPUT_CHECK(fs::is_directory(path),
                     "--model {}: no such directory (give an HF model directory or a veomni checkpoint)", path);
  if (fs::exists(fs::path(path) / "config.json")) return load_hf_directory(path, device);
  return load_checkpoint(path, device);
}

}  // namespace veomni
