// Reads and validates the talker_config of a Qwen3-Omni HF config.json (transformers 5.x).
#include "model/talker/talker_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"
#include "io/json_keys.h"

namespace veomni {

namespace {

using nlohmann::json;

// A nested object that must be present (InputError naming the source and the key).
const json& object_at(const json& parent, const char* key, const std::string& source) {
  return JsonKeys(parent, source).object(key);
}

// A sub-config read as a qwen3 / qwen3_moe config (the keys are the same).
ModelConfig read_as(const json& object, const char* model_type, const std::string& source) {
  json plain = object;
  plain["model_type"] = model_type;
  return model_config_from_json(plain, source);
}

std::vector<int64_t> read_mrope_section(const json& text, const std::vector<int64_t>& fallback) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!text.contains(key) || !text.at(key).is_object()) continue;
    const json& rope = text.at(key);
    if (rope.contains("mrope_section") && rope.at("mrope_section").is_array())
      return rope.at("mrope_section").get<std::vector<int64_t>>();
  }
  return fallback;
}

}  // namespace

TalkerConfig talker_config_from_json(const json& object, const std::string& source) {
  VEOMNI_INPUT_CHECK(object.is_object(), "{}: the talker config must be a JSON object, got {}", source, object.dump());
  const JsonKeys keys(object, source);
  TalkerConfig c;
  const json& text = object_at(object, "text_config", source);
  c.text = read_as(text, "qwen3_moe", source + " text_config");
  VEOMNI_INPUT_CHECK(c.text.num_experts > 0, "{} text_config: key 'num_experts' must be positive (the talker is a "
                     "mixture of experts)", source);
  c.shared_expert_intermediate_size =
      JsonKeys(text, source + " text_config").integer("shared_expert_intermediate_size", 0);
  VEOMNI_INPUT_CHECK(c.shared_expert_intermediate_size > 0,
                     "{} text_config: key 'shared_expert_intermediate_size' must be positive, got {}", source,
                     c.shared_expert_intermediate_size);
  c.mrope_section = read_mrope_section(text, c.mrope_section);
  c.code_predictor = read_as(object_at(object, "code_predictor_config", source), "qwen3",
                             source + " code_predictor_config");
  c.num_code_groups = keys.integer("num_code_groups", c.num_code_groups);
  c.thinker_hidden_size = keys.integer("thinker_hidden_size", c.thinker_hidden_size);
  c.accept_hidden_layer = keys.integer("accept_hidden_layer", c.accept_hidden_layer);
  c.codec_eos_token_id = keys.integer("codec_eos_token_id", c.codec_eos_token_id);
  c.codec_nothink_id = keys.integer("codec_nothink_id", c.codec_nothink_id);
  c.codec_think_bos_id = keys.integer("codec_think_bos_id", c.codec_think_bos_id);
  c.codec_think_eos_id = keys.integer("codec_think_eos_id", c.codec_think_eos_id);
  c.codec_pad_id = keys.integer("codec_pad_id", c.codec_pad_id);
  c.codec_bos_id = keys.integer("codec_bos_id", c.codec_bos_id);
  if (object.contains("speaker_id") && object.at("speaker_id").is_object())
    for (const auto& [name, id] : object.at("speaker_id").items()) {
      VEOMNI_INPUT_CHECK(id.is_number_integer(), "{}: key 'speaker_id.{}': expected an integer, got {}", source, name,
                         id.dump());
      c.speaker_id[name] = id.get<int64_t>();
    }

  VEOMNI_INPUT_CHECK(c.num_code_groups >= 2, "{}: key 'num_code_groups' must be at least 2, got {}", source,
                     c.num_code_groups);
  VEOMNI_INPUT_CHECK(c.thinker_hidden_size > 0, "{}: key 'thinker_hidden_size' must be positive, got {}", source,
                     c.thinker_hidden_size);
  // The code predictor reads the talker's hidden state and codec embeddings as its own inputs.
  VEOMNI_INPUT_CHECK(c.code_predictor.hidden_size == c.text.hidden_size,
                     "{}: code_predictor_config.hidden_size ({}) differs from text_config.hidden_size ({})", source,
                     c.code_predictor.hidden_size, c.text.hidden_size);
  VEOMNI_INPUT_CHECK(c.codec_eos_token_id >= 0 && c.codec_eos_token_id < c.text.vocab_size,
                     "{}: key 'codec_eos_token_id' ({}) is outside the talker vocabulary of {}", source,
                     c.codec_eos_token_id, c.text.vocab_size);
  return c;
}

TalkerConfig load_talker_config(const std::string& path) {
  const std::string file = std::filesystem::is_directory(path) ? path + "/config.json" : path;
  const json root = read_json_file(file);
  const JsonKeys keys(root, file);
  const std::string model_type = keys.string("model_type", "");
  VEOMNI_INPUT_CHECK(model_type == "qwen3_omni_moe",
                     "{}: key 'model_type': \"{}\" has no talker (expected qwen3_omni_moe)", file, model_type);
  VEOMNI_INPUT_CHECK(keys.has("talker_config"),
                     "{}: no key 'talker_config' (a Qwen3-Omni model saved without its speech stages)", file);
  return talker_config_from_json(keys.object("talker_config"), file + " talker_config");
}

}  // namespace veomni
