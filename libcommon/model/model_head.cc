// Head names for checkpoints and messages, and the config.json keys of HF's classification classes with one label.
#include "model/model_head.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace veomni {

namespace {

const char* kOneLabelHint =
    "hint: a reward or value model has num_labels 1: \"id2label\": {\"0\": \"LABEL_0\"}, \"label2id\": "
    "{\"LABEL_0\": 0}";

// The number of entries of an id2label / label2id object, or an InputError naming the key.
size_t label_map_size(const nlohmann::json& config, const char* key, const std::string& file) {
  const nlohmann::json& map = config.at(key);
  VEOMNI_INPUT_CHECK(map.is_object(), "{}: key '{}' must be an object, found {} ({})", file, key, map.dump(),
                     kOneLabelHint);
  return map.size();
}

}  // namespace

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

const char* model_head_objectives(ModelHead head) {
  switch (head) {
    case ModelHead::LanguageModel: return "sft, dpo or ppo_actor";
    case ModelHead::SequenceReward: return "reward";
    case ModelHead::TokenValue: return "value";
  }
  return "sft";
}

std::string hf_architecture(const std::string& model_type, ModelHead head) {
  const std::string family = model_type == "qwen3_moe" ? "Qwen3Moe" : "Qwen3";
  switch (head) {
    case ModelHead::LanguageModel: return family + "ForCausalLM";
    case ModelHead::SequenceReward: return family + "ForSequenceClassification";
    case ModelHead::TokenValue: return family + "ForTokenClassification";
  }
  return family + "ForCausalLM";
}

ModelHead hf_head_of_architectures(const nlohmann::json& config, ModelHead fallback) {
  if (!config.is_object() || !config.contains("architectures") || !config["architectures"].is_array() ||
      config["architectures"].empty())
    return fallback;
  for (const nlohmann::json& name : config["architectures"]) {
    if (!name.is_string()) continue;
    const std::string text = name.get<std::string>();
    if (text.ends_with("ForSequenceClassification")) return ModelHead::SequenceReward;
    if (text.ends_with("ForTokenClassification")) return ModelHead::TokenValue;
  }
  return ModelHead::LanguageModel;
}

void check_hf_single_label(const nlohmann::json& config, const std::string& file) {
  auto has = [&](const char* key) { return config.contains(key) && !config.at(key).is_null(); };
  VEOMNI_INPUT_CHECK(has("num_labels") || has("id2label"),
                     "{}: key 'id2label' is absent (nor is num_labels set), so transformers reads 2 labels; {}", file,
                     kOneLabelHint);
  if (has("num_labels")) {
    const nlohmann::json& n = config.at("num_labels");
    VEOMNI_INPUT_CHECK(n.is_number_integer() && n.get<int64_t>() == 1, "{}: key 'num_labels' is {}, not 1; {}", file,
                       n.dump(), kOneLabelHint);
  }
  for (const char* key : {"id2label", "label2id"})
    if (has(key)) {
      const size_t labels = label_map_size(config, key, file);
      VEOMNI_INPUT_CHECK(labels == 1, "{}: key '{}' lists {} labels, not 1; {}", file, key, labels, kOneLabelHint);
    }
}

void set_hf_head_keys(nlohmann::json& config, const std::string& model_type, ModelHead head) {
  config["architectures"] = nlohmann::json::array({hf_architecture(model_type, head)});
  if (head == ModelHead::LanguageModel) return;
  config.erase("num_labels");
  config["id2label"] = {{"0", "LABEL_0"}};
  config["label2id"] = {{"LABEL_0", 0}};
  if (head == ModelHead::TokenValue && (!config.contains("classifier_dropout") || config["classifier_dropout"].is_null()))
    config["classifier_dropout"] = 0.0;
}

}  // namespace veomni
