// Reads the nested text / vision / audio configs of Qwen3-VL and Qwen3-Omni into the toolkit's config structs.
#include "model/thinker/thinker_config.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>
#include <spdlog/fmt/ranges.h>

#include "core/error.h"
#include "io/json_file.h"
#include "io/json_keys.h"

namespace veomni {

namespace {

using nlohmann::json;

// A nested object that must be present (InputError naming the source and the key).
const json& thinker_object_at(const json& parent, const char* key, const std::string& source) {
  return JsonKeys(parent, source).object(key);
}

// transformers' Qwen3VLTextRotaryEmbedding default when rope_parameters carries no mrope_section.
std::vector<int64_t> read_mrope_section(const json& text, const std::string& source) {
  std::vector<int64_t> section = {24, 20, 20};
  if (!text.contains("rope_parameters") || !text.at("rope_parameters").is_object()) return section;
  const json& rope = text.at("rope_parameters");
  if (!rope.contains("mrope_section") || rope.at("mrope_section").is_null()) return section;
  const json& value = rope.at("mrope_section");
  VEOMNI_INPUT_CHECK(value.is_array() && value.size() == 3,
                     "{}: key 'rope_parameters.mrope_section': expected three integers, got {}", source, value.dump());
  section.clear();
  for (const json& item : value) {
    VEOMNI_INPUT_CHECK(item.is_number_integer() && item.get<int64_t>() >= 0,
                       "{}: key 'rope_parameters.mrope_section': expected non-negative integers, got {}", source,
                       value.dump());
    section.push_back(item.get<int64_t>());
  }
  return section;
}

// The text_config as a qwen3 / qwen3_moe config: the keys are the same; the mixture of experts decides the type.
ModelConfig read_text_config(const json& text, const json& parent, const std::string& model_type,
                             const std::string& source) {
  json plain = text;
  const bool moe = model_type != "qwen3_vl";
  plain["model_type"] = moe ? "qwen3_moe" : "qwen3";
  // The tie flag lives on the outer config in transformers 5.x; it wins over a copy inside text_config.
  if (parent.contains("tie_word_embeddings") && parent.at("tie_word_embeddings").is_boolean())
    plain["tie_word_embeddings"] = parent.at("tie_word_embeddings");
  ModelConfig config = model_config_from_json(plain, source + " text_config");
  // Qwen3VLMoeTextTopKRouter always renormalises the top-k probabilities (it has no norm_topk_prob switch).
  if (model_type == "qwen3_vl_moe") config.norm_topk_prob = true;
  return config;
}

}  // namespace

const std::vector<std::string>& multimodal_model_types() {
  static const std::vector<std::string> types = {"qwen3_vl", "qwen3_vl_moe", "qwen3_omni_moe"};
  return types;
}

bool is_multimodal_model_type(const std::string& model_type) {
  const auto& types = multimodal_model_types();
  return std::find(types.begin(), types.end(), model_type) != types.end();
}

ThinkerConfig thinker_config_from_json(const json& root, const std::string& source) {
  VEOMNI_INPUT_CHECK(root.is_object(), "{}: a model config must be a JSON object, got {}", source, root.type_name());
  const std::string type = root.contains("model_type") && root.at("model_type").is_string()
                               ? root.at("model_type").get<std::string>()
                               : std::string();
  VEOMNI_INPUT_CHECK(is_multimodal_model_type(type),
                     "{}: key 'model_type': \"{}\" is not a multimodal model (supported: {})", source, type,
                     fmt::join(multimodal_model_types(), ", "));
  ThinkerConfig c;
  c.model_type = type;
  const bool omni = type == "qwen3_omni_moe";
  const json& parent = omni ? thinker_object_at(root, "thinker_config", source) : root;
  const std::string parent_source = omni ? source + " thinker_config" : source;
  const json& text = thinker_object_at(parent, "text_config", parent_source);
  c.text = read_text_config(text, parent, type, parent_source);
  c.mrope_section = read_mrope_section(text, parent_source + " text_config");
  c.vision = vision_config_from_json(thinker_object_at(parent, "vision_config", parent_source), type,
                                     parent_source + " vision_config");
  VEOMNI_INPUT_CHECK(c.vision.out_hidden_size == c.text.hidden_size,
                     "{}: key 'vision_config.out_hidden_size': {} differs from the text hidden_size {}", parent_source,
                     c.vision.out_hidden_size, c.text.hidden_size);
  if (omni) {
    c.has_audio = true;
    c.audio = audio_encoder_config_from_json(thinker_object_at(parent, "audio_config", parent_source),
                                             parent_source + " audio_config");
    VEOMNI_INPUT_CHECK(c.audio.output_dim == c.text.hidden_size,
                       "{}: key 'audio_config.output_dim': {} differs from the text hidden_size {}", parent_source,
                       c.audio.output_dim, c.text.hidden_size);
  }
  c.text_prefix = omni ? "thinker.model." : "model.language_model.";
  c.lm_head_name = omni ? "thinker.lm_head.weight" : "lm_head.weight";
  return c;
}

ThinkerConfig load_thinker_config(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string file = fs::is_directory(path) ? (fs::path(path) / "config.json").string() : path;
  VEOMNI_INPUT_CHECK(fs::exists(file), "model config {} does not exist{}", file,
                     fs::is_directory(path) ? " (the directory has no config.json)" : "");
  return thinker_config_from_json(read_json_file(file), file);
}

}  // namespace veomni
