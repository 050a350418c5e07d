// Text or multimodal body with its heads for the trainer; VeOmni's tower roles and freezing by parameter name.
#include "train/train_model.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"
#include "model/hf_loader.h"
#include "model/weight_source.h"

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

ModelHead model_head_for_objective(const std::string& objective) {
  if (objective == "reward") return ModelHead::SequenceReward;
  if (objective == "value") return ModelHead::TokenValue;
  return ModelHead::LanguageModel;
}

const char* model_head_name(ModelHead head) {
  switch (head) {
    case ModelHead::LanguageModel: return "causal_lm";
    case ModelHead::SequenceReward: return "sequence_reward";
    case ModelHead::TokenValue: return "token_value";
  }
  return "causal_lm";
}

ModelHead model_head_from_name(const std::string& name) {
  for (ModelHead head : {ModelHead::LanguageModel, ModelHead::SequenceReward, ModelHead::TokenValue})
    if (name == model_head_name(head)) return head;
  throw InputError(fmt::format("model head '{}' is not one of causal_lm, sequence_reward, token_value", name));
}

TrainModel::TrainModel(const ModelConfig& config, const ModelOptions& options, ModelHead head)
    : head_(head), body_(std::make_unique<TextBody>(config, options)) {
  make_head(options.lm_head_name, options.hooks.params);
}

TrainModel::TrainModel(const ThinkerConfig& config, const ModelOptions& options, bool freeze_vit, ModelHead head)
    : head_(head) {
  MultimodalOptions mm;
  mm.lm = options;
  // Qwen3-Omni keeps its merger trainable under freeze_vit, so its tower's backward still runs.
  mm.freeze_vit = freeze_vit && config.model_type != "qwen3_omni_moe";
  body_ = std::make_unique<MultimodalBody>(config, mm);
  make_head(config.lm_head_name, options.hooks.params);
}

TrainModel::~TrainModel() = default;

// The head group runs under the body's construction-time parameter hooks too. The value head takes HF's `score`
// name beside the LM head's (lm_head.weight -> score.weight, thinker.lm_head.weight -> thinker.score.weight).
void TrainModel::make_head(const std::string& lm_head_name, ParamHooks* hooks) {
  if (head_ == ModelHead::LanguageModel) {
    lm_head_ = std::make_unique<LmHead>(body_->head_site(), body_->text_config(), lm_head_name);
    lm_head_->set_param_hooks(hooks);
    return;
  }
  const size_t at = lm_head_name.rfind("lm_head.");
  const std::string prefix = (at == std::string::npos ? std::string() : lm_head_name.substr(0, at)) + "score.";
  value_head_ = std::make_unique<ValueHead>(body_->head_site(), body_->text_config(),
                                            head_ == ModelHead::TokenValue, prefix);
  value_head_->set_param_hooks(hooks);
}

LmHead& TrainModel::lm_head() {
  VEOMNI_CHECK(lm_head_, "the model has a {} head, not the LM head", model_head_name(head_));
  return *lm_head_;
}

ValueHead& TrainModel::value_head() {
  VEOMNI_CHECK(value_head_, "the model has the LM head, not a value head");
  return *value_head_;
}

void load_start_weights(TrainModel& model, const std::string& model_path, uint64_t seed) {
  if (model_path.empty()) model.init_weights(seed);
  else load_hf_weights(model.params(), HfCheckpointSource(model_path));
}

void TrainModel::set_param_hooks(ParamHooks* hooks) {
  body_->set_param_hooks(hooks);
  if (lm_head_) lm_head_->set_param_hooks(hooks);
  if (value_head_) value_head_->set_param_hooks(hooks);
}

}  // namespace veomni
