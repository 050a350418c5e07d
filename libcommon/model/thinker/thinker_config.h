// The configuration of a multimodal Qwen3 model (Qwen3-VL, Qwen3-VL-MoE, the Qwen3-Omni thinker) from config.json.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/audio/audio_encoder_config.h"
#include "model/model_config.h"
#include "model/vision/vision_config.h"

namespace veomni {

struct ThinkerConfig {
  std::string model_type;  // "qwen3_vl", "qwen3_vl_moe" or "qwen3_omni_moe"
  // The text model as a qwen3 / qwen3_moe config (text_config, with the parent's tie_word_embeddings).
  ModelConfig text;
  std::vector<int64_t> mrope_section;  // text_config.rope_parameters.mrope_section (default [24, 20, 20])
  VisionConfig vision;
  bool has_audio = false;  // qwen3_omni_moe only
  AudioEncoderConfig audio;
  // HF names of the text model: "model.language_model." + "lm_head.weight" (Qwen3-VL), "thinker.model." +
  // "thinker.lm_head.weight" (Qwen3OmniMoeForConditionalGeneration).
  std::string text_prefix;
  std::string lm_head_name;
};

// The model types thinker_config_from_json accepts.
const std::vector<std::string>& multimodal_model_types();
bool is_multimodal_model_type(const std::string& model_type);

// Parses a whole HF config.json object; errors name `source` and the key. The encoders' output widths must equal
// the text hidden size.
ThinkerConfig thinker_config_from_json(const nlohmann::json& json, const std::string& source);
ThinkerConfig load_thinker_config(const std::string& path);  // a config.json file, or a directory holding one

}  // namespace veomni
