// The Qwen3-Omni talker configuration (talker_config of config.json): its MoE text model, the code predictor and the
// codec token ids.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/model_config.h"

namespace veomni {

struct TalkerConfig {
  // Prefix of every parameter name (Qwen3OmniMoeForConditionalGeneration -> talker).
  std::string param_prefix = "talker.";
  // text_config as a qwen3_moe config: every layer is sparse with a shared expert (transformers'
  // Qwen3OmniMoeTalkerDecoderLayer ignores mlp_only_layers and decoder_sparse_step).
  ModelConfig text;
  int64_t shared_expert_intermediate_size = 0;
  std::vector<int64_t> mrope_section = {24, 20, 20};  // for [3, T] position ids (interleaved M-RoPE)
  // code_predictor_config as a qwen3 (dense) config.
  ModelConfig code_predictor;
  // Defaults are transformers 5.17's Qwen3OmniMoeTalkerConfig.
  int64_t num_code_groups = 32;
  int64_t thinker_hidden_size = 2048;
  int64_t accept_hidden_layer = 18;  // the thinker layer whose hidden states feed hidden_projection
  int64_t codec_eos_token_id = 4198;
  int64_t codec_nothink_id = 4203;
  int64_t codec_think_bos_id = 4204;
  int64_t codec_think_eos_id = 4205;
  int64_t codec_pad_id = 4196;
  int64_t codec_bos_id = 4197;
  std::map<std::string, int64_t> speaker_id;  // lower-case speaker name -> codec token

  // The codec tokens a greedy talker may not emit: the last 1024 of the vocabulary (special tokens) except EOS,
  // as Qwen3OmniMoeForConditionalGeneration.generate suppresses them.
  bool is_suppressed(int64_t token) const {
    return token >= text.vocab_size - 1024 && token != codec_eos_token_id;
  }
};

// Parses a talker_config object; errors name `source` and the key.
TalkerConfig talker_config_from_json(const nlohmann::json& talker_config, const std::string& source);
// From a config.json (file, or directory holding one) of model_type qwen3_omni_moe (its talker_config); a model
// without one, or another model type, is an InputError.
TalkerConfig load_talker_config(const std::string& path);

}  // namespace veomni
