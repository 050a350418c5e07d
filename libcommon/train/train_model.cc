// Text or multimodal body with its heads for the trainer; VeOmni's tower roles and freezing by parameter name.
#include "train/train_model.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "io/json_file.h"
#include "model/hf_loader.h"
#include "model/init.h"
#include "model/layers/lora_adapter.h"
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

TrainModel::TrainModel(const ModelConfig& config, const ModelOptions& options, ModelHead head)
    : head_(head), body_(std::make_unique<TextBody>(config, options)) {
  make_head(options.lm_head_name, options.hooks.params);
  setup_lora(options.lora_config);
}

TrainModel::TrainModel(const ThinkerConfig& config, const ModelOptions& options, bool freeze_vit, ModelHead head)
    : head_(head) {
  MultimodalOptions mm;
  mm.lm = options;
  // Qwen3-Omni keeps its merger trainable under freeze_vit, so its tower's backward still runs.
  mm.freeze_vit = freeze_vit && config.model_type != "qwen3_omni_moe";
  body_ = std::make_unique<MultimodalBody>(config, mm);
  make_head(config.lm_head_name, options.hooks.params);
  setup_lora(options.lora_config);
}

namespace {

// "a, b, c, ..." of the first few names.
std::string first_names(const std::vector<std::string>& names, size_t count) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < count; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > count) text += ", ...";
  return text;
}

// A value head's projection (score.weight / score.bias, thinker.score.*) trains with the adapters: it is new.
bool is_value_head_param(const std::string& name) {
  return name.starts_with("score.") || name.find(".score.") != std::string::npos;
}

}  // namespace

void TrainModel::setup_lora(const LoraConfig& config) {
  if (!config.enabled()) return;
  LoraRegistry* registry = params().lora();
  VEOMNI_CHECK(registry != nullptr, "LoRA settings of rank {} but the model registered no adapter registry",
               config.rank);
  const std::vector<std::string> unmatched = config.unmatched_entries(registry->capable_modules());
  if (!unmatched.empty()) {
    std::vector<std::string> examples;
    for (const std::string& module : registry->capable_modules()) {
      const std::string last = module.substr(module.rfind('.') + 1);
      const bool seen = std::find(examples.begin(), examples.end(), last) != examples.end();
      if (!seen && (module.find("experts.") == std::string::npos)) examples.push_back(last);
    }
    std::vector<std::string> quoted;
    for (const std::string& entry : unmatched) quoted.push_back("'" + entry + "'");
    throw InputError(fmt::format(
        "model.lora_config.lora_modules: the {} {} {} no module of this model that can take an adapter (hint: "
        "module names such as {}; e.g. {})",
        unmatched.size() == 1 ? "entry" : "entries", first_names(quoted, 8), unmatched.size() == 1 ? "matches" : "match",
        first_names(examples, 8), first_names(registry->capable_modules(), 3)));
  }
  for (const auto& param : params().all()) {
    const bool adapter = is_lora_param_name(param->name);
    param->trainable = adapter || is_value_head_param(param->name);
    if (adapter) lora_params_.push_back(param.get());
  }
}

void TrainModel::set_adapters_enabled(bool enabled) {
  if (LoraRegistry* registry = params().lora()) registry->set_applied(enabled);
}

bool TrainModel::adapters_enabled() const {
  const LoraRegistry* registry = body_->params().lora();
  return registry != nullptr && registry->applied();
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

namespace {

// The config.json beside the weights of model_path (a directory, or a .safetensors file in one); "" when none.
std::string weights_config_file(const std::string& model_path) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::is_directory(model_path) ? fs::path(model_path) : fs::path(model_path).parent_path();
  const fs::path file = dir / "config.json";
  std::error_code ec;
  return fs::is_regular_file(file, ec) ? file.string() : std::string();
}

std::string architectures_text(const std::string& config_file) {
  if (config_file.empty()) return "no config.json";
  const nlohmann::json config = read_json_file(config_file);
  return config.is_object() && config.contains("architectures") ? "architectures " + config["architectures"].dump()
                                                                 : "no architectures key";
}

// A reward or value model's weights hold score.weight and no lm_head.weight: an LM objective cannot start from them
// (with tied embeddings the lm_head would silently be the embedding, not what was trained).
void check_causal_lm_source(const WeightSource& source, const std::string& model_path) {
  for (const std::string prefix : {"", "thinker."}) {
    const bool classification = source.contains(prefix + "score.weight") && !source.contains(prefix + "lm_head.weight");
    VEOMNI_INPUT_CHECK(!classification,
                       "{}: holds {}score.weight and no {}lm_head.weight ({}): it is a reward or value model, which "
                       "has no LM head, and train.objective {} trains the LM head (hint: start from the causal LM it "
                       "was made from, or train it further with train.objective reward or value)",
                       model_path, prefix, prefix, architectures_text(weights_config_file(model_path)),
                       model_head_objectives(ModelHead::LanguageModel));
  }
}

// A value head starts from the source's score.* (a ...ForSequenceClassification / ...ForTokenClassification
// directory of one label) or, from a causal LM, as transformers initialises a missing head.
void load_value_model(TrainModel& model, const std::shared_ptr<const WeightSource>& shared_source,
                      const std::string& model_path, uint64_t seed, const std::set<std::string>& adapters) {
  const WeightSource& source = *shared_source;
  ValueHead& head = model.value_head();
  Parameter& weight = head.weight();
  Parameter* bias = head.bias();
  std::set<std::string> missing;
  if (source.contains(weight.name)) {
    const std::string config_file = weights_config_file(model_path);
    if (!config_file.empty()) check_hf_single_label(read_json_file(config_file), config_file);
    if (bias && !source.contains(bias->name)) {
      missing.insert(bias->name);
      spdlog::info("{}: no {} (a sequence-classification model): the token-value head's bias starts at zero",
                   model_path, bias->name);
    }
    const std::string source_bias = weight.name.substr(0, weight.name.size() - 6) + "bias";
    if (!bias && source.contains(source_bias))
      spdlog::warn("{}: {} is not read: a {} head has no bias (a constant shift of every reward)", model_path,
                   source_bias, model_head_name(model.head()));
  } else {
    missing.insert(weight.name);
    if (bias) missing.insert(bias->name);
    spdlog::info("{}: no {} (a causal LM): the {} head starts as transformers initialises it, {} ~ normal(0, {}){} "
                 "seeded by train.seed {}; the source's lm_head is not read",
                 model_path, weight.name, model_head_name(model.head()), weight.name,
                 model.body().text_config().initializer_range, bias ? fmt::format(", {} = 0,", bias->name) : ",",
                 seed);
  }
  std::set<std::string> skip = missing;
  skip.insert(adapters.begin(), adapters.end());
  load_hf_weights(model.params(), shared_source, skip);
  for (const auto& param : model.params().all())
    if (missing.contains(param->name)) init_parameter(*param, hf_init_spec(param->name, model.body().text_config()), seed);
}

}  // namespace

void load_start_weights(TrainModel& model, const std::string& model_path, uint64_t seed) {
  if (model_path.empty()) {
    model.init_weights(seed);
    return;
  }
  // Shared: deferred parameters read their rows from it when FSDP builds their shards.
  const auto source = std::make_shared<const HfCheckpointSource>(model_path);
  std::set<std::string> adapters;
  for (const Parameter* param : model.lora_params()) adapters.insert(param->name);
  if (model.head() == ModelHead::LanguageModel) {
    check_causal_lm_source(*source, model_path);
    load_hf_weights(model.params(), source, adapters);
  } else {
    load_value_model(model, source, model_path, seed, adapters);
  }
  if (model.has_lora()) init_lora_adapters(model.params(), seed);
}

void TrainModel::set_param_hooks(ParamHooks* hooks) {
  body_->set_param_hooks(hooks);
  if (lm_head_) lm_head_->set_param_hooks(hooks);
  if (value_head_) value_head_->set_param_hooks(hooks);
}

}  // namespace veomni
