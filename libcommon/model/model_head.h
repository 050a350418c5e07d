// Which head sits on a model body, and how HuggingFace spells each one: the model class in config.json's
// `architectures`, the single label of a reward or value model, the `score` tensors.
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace veomni {

// Which head sits on the body, as HF names the model class: ...ForCausalLM (the LM head: SFT, DPO, the PPO actor),
// ...ForSequenceClassification with num_labels 1 (`score` without bias, read at a sequence's last token: reward
// models), ...ForTokenClassification with num_labels 1 (`score` with a bias, a value per token: value models).
enum class ModelHead { LanguageModel, SequenceReward, TokenValue };

// The head train.objective trains: reward -> SequenceReward, value -> TokenValue, the others the LM head.
ModelHead model_head_for_objective(const std::string& objective);
// "causal_lm", "sequence_reward", "token_value" (checkpoint metadata and messages) and back (InputError otherwise).
const char* model_head_name(ModelHead head);
ModelHead model_head_from_name(const std::string& name);
// The train.objective values that train the head, for messages: "sft, dpo or ppo_actor", "reward", "value".
const char* model_head_objectives(ModelHead head);

// The transformers class of a text model with that head: Qwen3ForCausalLM, Qwen3MoeForSequenceClassification, ...
std::string hf_architecture(const std::string& model_type, ModelHead head);
// The head config.json's `architectures` names (an entry ending in ForSequenceClassification or
// ForTokenClassification), LanguageModel for any other class, `fallback` when the key is absent or empty.
ModelHead hf_head_of_architectures(const nlohmann::json& config, ModelHead fallback);

// A reward or value model has one label: config.json's num_labels, id2label and label2id (when present) must say
// so, and one of them must be present (transformers reads 2 labels otherwise). InputError naming `file` and the key.
void check_hf_single_label(const nlohmann::json& config, const std::string& file);
// Sets the keys transformers reads for that head: `architectures`, and for a value head id2label / label2id of one
// label (as save_pretrained writes num_labels 1; num_labels itself is dropped) and, for token values,
// classifier_dropout 0 unless set (the value head has no dropout). Leaves a causal LM's other keys alone.
void set_hf_head_keys(nlohmann::json& config, const std::string& model_type, ModelHead head);

}  // namespace veomni
