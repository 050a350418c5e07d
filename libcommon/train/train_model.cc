// Text or multimodal model behind the trainer's surface; VeOmni's tower roles and freezing by parameter name.
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

TrainModel::TrainModel(const ModelConfig& config, const ModelOptions& options)
    : text_(std::make_unique<CausalLM>(config, options)) {}

TrainModel::TrainModel(const ThinkerConfig& config, const ModelOptions& options, bool freeze_vit) {
  MultimodalOptions mm;
  mm.lm = options;
  // Qwen3-Omni keeps its merger trainable under freeze_vit, so its tower's backward still runs.
  mm.freeze_vit = freeze_vit && config.model_type != "qwen3_omni_moe";
  multimodal_ = std::make_unique<MultimodalLM>(config, mm);
}

ParamStore& TrainModel::params() { return multimodal_ ? multimodal_->params() : text_->params(); }

void TrainModel::init_weights(uint64_t seed) {
  if (multimodal_) multimodal_->init_weights(seed);
  else text_->init_weights(seed);
}

void TrainModel::set_param_hooks(ParamHooks* hooks) {
  if (multimodal_) multimodal_->set_param_hooks(hooks);
  else text_->set_param_hooks(hooks);
}

ForwardStats TrainModel::forward(const MultimodalBatch& batch) {
  return multimodal_ ? multimodal_->forward(batch) : text_->forward(batch.text);
}

void TrainModel::backward(float ce_grad_scale, float aux_grad_scale) {
  if (multimodal_) multimodal_->backward(ce_grad_scale, aux_grad_scale);
  else text_->backward(ce_grad_scale, aux_grad_scale);
}

}  // namespace veomni
