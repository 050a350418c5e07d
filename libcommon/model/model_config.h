// The language-model configuration read from a HuggingFace config.json (model_type qwen3 / qwen3_moe).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/model_head.h"

namespace veomni {

struct ModelConfig {
  std::string model_type;  // "qwen3" or "qwen3_moe"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  // From config.json; when absent, transformers' default: 128 for qwen3 (Qwen3Config.head_dim), hidden_size /
  // num_attention_heads for qwen3_moe (Qwen3MoeConfig has no head_dim field).
  int64_t head_dim = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;  // top-level rope_theta or rope_parameters.rope_theta
  bool tie_word_embeddings = false;
  double initializer_range = 0.02;
  bool attention_bias = false;  // true is rejected (not supported)
  int64_t max_position_embeddings = 32768;  // not used by training; kept so that written configs carry it
  std::string dtype;  // "dtype" (or legacy "torch_dtype") of the weights, e.g. "bfloat16"; "" when absent
  // Keys of config.json that nothing here interprets (token ids, use_cache, ...), as a JSON object text, so that
  // model_config_to_json hands them on unchanged (a merged checkpoint keeps its eos_token_id). "" = none.
  std::string extra_json;

  // Mixture of experts (model_type qwen3_moe); num_experts == 0 means dense.
  int64_t num_experts = 0;  // num_experts or num_local_experts
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  double router_aux_loss_coef = 0.001;
  bool output_router_logits = false;

  bool is_moe() const { return num_experts > 0; }
  // Layer i is sparse iff i is not in mlp_only_layers, num_experts > 0 and (i+1) % decoder_sparse_step == 0.
  bool layer_is_sparse(int64_t layer) const;
  int64_t q_size() const { return num_attention_heads * head_dim; }
  int64_t kv_size() const { return num_key_value_heads * head_dim; }
};

// The model_type values model_config_from_json accepts.
const std::vector<std::string>& supported_model_types();

// Parses and validates; errors name the source (file path) and the key. Unknown model_type -> InputError.
// Keys absent (or null) take transformers 5.x defaults of that model type.
ModelConfig model_config_from_json(const nlohmann::json& json, const std::string& source);
ModelConfig load_model_config(const std::string& path);  // a config.json file, or a directory holding one
// Writes the HF form (transformers 5.x field names, e.g. rope_parameters, num_local_experts) so that merged
// checkpoints load in transformers, as the class of `head` (architectures; one label for a reward or value head).
// Throws InputError (source "model config") when the config does not validate.
nlohmann::json model_config_to_json(const ModelConfig& config, ModelHead head = ModelHead::LanguageModel);
// Writes model_config_to_json(config, head) to path atomically (indented like transformers' save_pretrained).
void save_model_config(const ModelConfig& config, const std::string& path,
                       ModelHead head = ModelHead::LanguageModel);
// The keys that define the model's shape (sizes, heads, experts, RoPE, norms; not initializer_range or
// max_position_embeddings) whose values differ, as "key: a vs b". A checkpoint resumes only onto the same model.
std::vector<std::string> model_architecture_differences(const ModelConfig& a, const ModelConfig& b);
// The checks model_config_from_json makes, for a config built or edited in code; errors name `source`.
void validate_model_config(const ModelConfig& config, const std::string& source);

}  // namespace veomni
