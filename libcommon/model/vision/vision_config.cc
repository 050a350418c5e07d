// Reads and validates the vision_config of Qwen3-VL / Qwen3-VL-MoE / Qwen3-Omni HF configs (transformers 5.x).
#include "model/vision/vision_config.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"
#include "io/json_keys.h"

namespace veomni {

namespace {

using nlohmann::json;

VisionFlavor flavor_of(const std::string& parent, const std::string& source) {
  if (parent == "qwen3_vl" || parent == "qwen3_vl_moe") return VisionFlavor::Qwen3VL;
  if (parent == "qwen3_omni_moe" || parent == "qwen3_omni_moe_thinker") return VisionFlavor::Qwen3Omni;
  throw InputError(fmt::format("{}: model_type '{}' has no supported vision tower (expected qwen3_vl, qwen3_vl_moe "
                               "or qwen3_omni_moe)",
                               source, parent));
}

}  // namespace

int64_t VisionConfig::grid_side() const {
  return static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(num_position_embeddings))));
}

void validate_vision_config(const VisionConfig& c, const std::string& source) {
  auto fail = [&](const std::string& key, const std::string& message) {
    throw InputError(fmt::format("{}: vision_config key '{}': {}", source, key, message));
  };
  for (const auto& [key, value] :
       {std::pair<const char*, int64_t>{"depth", c.depth}, {"hidden_size", c.hidden_size},
        {"intermediate_size", c.intermediate_size}, {"num_heads", c.num_heads}, {"in_channels", c.in_channels},
        {"patch_size", c.patch_size}, {"temporal_patch_size", c.temporal_patch_size},
        {"spatial_merge_size", c.spatial_merge_size}, {"out_hidden_size", c.out_hidden_size},
        {"num_position_embeddings", c.num_position_embeddings}})
    if (value <= 0) fail(key, fmt::format("must be positive, got {}", value));
  if (c.hidden_size % c.num_heads != 0)
    fail("num_heads", fmt::format("hidden_size {} is not a multiple of num_heads {}", c.hidden_size, c.num_heads));
  // The 2-D rotary gives each of the two axes a quarter of head_dim in frequency pairs.
  if (c.head_dim() % 4 != 0) fail("num_heads", fmt::format("head_dim {} is not a multiple of 4", c.head_dim()));
  if (c.grid_side() * c.grid_side() != c.num_position_embeddings)
    fail("num_position_embeddings", fmt::format("{} is not a square number", c.num_position_embeddings));
  if (c.grid_side() < 2) fail("num_position_embeddings", "the position grid needs at least 2x2 entries");
  if (c.hidden_act != "gelu_pytorch_tanh" && c.hidden_act != "gelu")
    fail("hidden_act", fmt::format("'{}' is not supported (gelu_pytorch_tanh or gelu)", c.hidden_act));
}

VisionConfig vision_config_from_json(const json& object, const std::string& parent, const std::string& source) {
  if (!object.is_object())
    throw InputError(fmt::format("{}: vision_config must be an object, got {}", source, object.dump()));
  const JsonKeys k(object, source);
  VisionConfig c;
  c.flavor = flavor_of(parent, source);
  c.param_prefix = c.flavor == VisionFlavor::Qwen3Omni ? "thinker.visual." : "model.visual.";
  c.model_type = k.string("model_type", c.flavor == VisionFlavor::Qwen3Omni ? "qwen3_omni_moe_vision_encoder" : parent);
  // Defaults of Qwen3VLVisionConfig / Qwen3OmniMoeVisionEncoderConfig (the same numbers).
  c.depth = k.integer("depth", 27);
  c.hidden_size = k.integer("hidden_size", 1152);
  c.hidden_act = k.string("hidden_act", "gelu_pytorch_tanh");
  c.intermediate_size = k.integer("intermediate_size", 4304);
  c.num_heads = k.integer("num_heads", 16);
  c.in_channels = k.integer("in_channels", 3);
  c.patch_size = k.square_size("patch_size", 16);
  c.spatial_merge_size = k.integer("spatial_merge_size", 2);
  c.temporal_patch_size = k.integer("temporal_patch_size", 2);
  c.out_hidden_size = k.integer("out_hidden_size", 3584);
  c.num_position_embeddings = k.integer("num_position_embeddings", 2304);
  c.deepstack_visual_indexes = k.integers("deepstack_visual_indexes", {8, 16, 24});
  c.initializer_range = k.number("initializer_range", 0.02);
  if (k.has("rope_parameters")) {
    const json& rope = object.at("rope_parameters");
    if (!rope.is_object())
      throw InputError(fmt::format("{}: vision_config key 'rope_parameters': expected an object", source));
    c.rope_theta = JsonKeys(rope, source).number("rope_theta", c.rope_theta);
  }
  validate_vision_config(c, source);
  return c;
}

VisionConfig load_vision_config(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string file = fs::is_directory(path) ? (fs::path(path) / "config.json").string() : path;
  VEOMNI_INPUT_CHECK(fs::exists(file), "model config {} does not exist", file);
  const json config = read_json_file(file);
  VEOMNI_INPUT_CHECK(config.is_object() && config.contains("model_type") && config.at("model_type").is_string(),
                     "{}: key 'model_type' is missing or not a string", file);
  const std::string model_type = config.at("model_type").get<std::string>();
  const json* holder = &config;
  if (model_type == "qwen3_omni_moe") {
    VEOMNI_INPUT_CHECK(config.contains("thinker_config") && config.at("thinker_config").is_object(),
                       "{}: a qwen3_omni_moe config needs a 'thinker_config' object", file);
    holder = &config.at("thinker_config");
  }
  VEOMNI_INPUT_CHECK(holder->contains("vision_config"), "{}: key 'vision_config' is missing (model_type '{}')", file,
                     model_type);
  flavor_of(model_type, file);
  return vision_config_from_json(holder->at("vision_config"), model_type, file);
}

}  // namespace veomni
