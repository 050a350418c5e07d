// Text or multimodal body with its heads for the trainer; VeOmni's tower roles and freezing by parameter name.
#include "train/train_model.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"

namespace veomni {

namespace {

nlohmann::json read_config_json(const std::string& config_path) {
  namespace fs = std::filesystem;
  const std::string file = fs::is_directory(config_path) ? (fs::path(config_path) / "config.json").string()
                                                         : config_path;
  VEOMNI_INPUT_CHECK(fs::exists(file), "model config '{}' does not exist{}", file,
                     fs::is_directory(config_path) ? " (the directory has no config.json)" : "");
  return read_json_file(file);
}

}  // namespace

std::string config_json_text(const std::string& config_path) { return read_config_json(config_path).dump(); }

bool is_multimodal_config(const std::string& config_path) {
  const nlohmann::json json = read_config_json(config_path);
  return json.is_object() && json.contains("model_type") && json["model_type"].is_string() &&
         is_multimodal_model_type(json["model_type"].get<std::string>());
}

ParamRole param_role(const std::string& hf_name) {
  if (hf_name.find("visual") != std::string::npos) return ParamRole::Vision;
  if (hf_name.find("audio_tower") != std::string::npos) return ParamRole::Audio;
  return ParamRole::LanguageModel;
}

bool param_frozen(const std::string& hf_name, const std::string& model_type, bool freeze_vit,
                  bool freeze_audio_tower) {
  switch (param_role(hf_name)) {
    case ParamRole::Vision:
      return freeze_vit && !(model_type == "qwen3_omni_moe" && hf_name.find("visual.merger.") != std::string::npos);
    case ParamRole::Audio:
      return freeze_audio_tower && hf_name.find("audio_tower.proj1.") == std::string::npos;
    case ParamRole::LanguageModel:
      return false;
  }
  return false;
}

namespace {

// The LM head's name in the HF layout of each model family (Qwen3-VL: lm_head.weight, Omni: thinker.lm_head.weight).
// The head group runs under the body's construction-time parameter hooks too.
std::unique_ptr<LmHead> make_lm_head(ModelBody& body, const std::string& lm_head_name, ParamHooks* hooks) {
  auto head = std::make_unique<LmHead>(body.head_site(), body.text_config(), lm_head_name);
  head->set_param_hooks(hooks);
  return head;
}

}  // namespace

TrainModel::TrainModel(const ModelConfig& config, const ModelOptions& options)
    : body_(std::make_unique<TextBody>(config, options)),
      lm_head_(make_lm_head(*body_, options.lm_head_name, options.hooks.params)) {}

TrainModel::TrainModel(const ThinkerConfig& config, const ModelOptions& options, bool freeze_vit) {
  MultimodalOptions mm;
  mm.lm = options;
  // Qwen3-Omni keeps its merger trainable under freeze_vit, so its tower's backward still runs.
  mm.freeze_vit = freeze_vit && config.model_type != "qwen3_omni_moe";
  body_ = std::make_unique<MultimodalBody>(config, mm);
  lm_head_ = make_lm_head(*body_, config.lm_head_name, options.hooks.params);
}

TrainModel::~TrainModel() = default;

void TrainModel::set_param_hooks(ParamHooks* hooks) {
  body_->set_param_hooks(hooks);
  lm_head_->set_param_hooks(hooks);
}

}  // namespace veomni
