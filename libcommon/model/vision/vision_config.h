// The vision tower's configuration, read from the vision_config of a Qwen3-VL, Qwen3-VL-MoE or Qwen3-Omni config.json.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace veomni {

// Qwen3-VL / Qwen3-VL-MoE name the mergers `merger.{norm,linear_fc1,linear_fc2}` and `deepstack_merger_list.j`;
// the Qwen3-Omni thinker names them `merger.{ln_q,mlp.0,mlp.2}` and `merger_list.j`. The maths is the same.
enum class VisionFlavor { Qwen3VL, Qwen3Omni };

struct VisionConfig {
  std::string model_type;  // of the vision_config ("qwen3_vl", "qwen3_vl_moe", "qwen3_omni_moe_vision_encoder")
  VisionFlavor flavor = VisionFlavor::Qwen3VL;
  // Prefix of every parameter name: "model.visual." (Qwen3VLForConditionalGeneration and its MoE sibling) or
  // "thinker.visual." (Qwen3OmniMoeForConditionalGeneration).
  std::string param_prefix = "model.visual.";
  int64_t depth = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_heads = 0;
  int64_t in_channels = 3;
  int64_t patch_size = 16;
  int64_t temporal_patch_size = 2;
  int64_t spatial_merge_size = 2;
  int64_t out_hidden_size = 0;
  int64_t num_position_embeddings = 0;  // a square grid: side = sqrt(num_position_embeddings)
  // Blocks whose output feeds a deepstack merger: block l feeds merger j where j is l's first position in the list.
  // As in transformers, every entry has a merger (parameters), but only entries naming an existing block produce a
  // feature (VeOmni's toy configs list [5, 11, 17] with depth 2).
  std::vector<int64_t> deepstack_visual_indexes;
  std::string hidden_act = "gelu_pytorch_tanh";   // of the blocks' MLP; the mergers always use exact (erf) GELU
  double initializer_range = 0.02;
  double rope_theta = 10000.0;  // of the 2-D vision rotary (rope_parameters.rope_theta when present)
  double layer_norm_eps = 1e-6;  // fixed in transformers (nn.LayerNorm(..., eps=1e-6))

  int64_t head_dim() const { return hidden_size / num_heads; }
  // Features of one flattened patch: in_channels * temporal_patch_size * patch_size^2 (1536 for the real sizes).
  int64_t patch_dim() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
  int64_t merge_unit() const { return spatial_merge_size * spatial_merge_size; }
  int64_t merged_hidden_size() const { return hidden_size * merge_unit(); }
  int64_t grid_side() const;  // sqrt(num_position_embeddings)
  bool tanh_gelu() const { return hidden_act == "gelu_pytorch_tanh"; }
};

// Parses a vision_config object. model_type_of_parent picks the flavour and prefix ("qwen3_vl", "qwen3_vl_moe",
// "qwen3_omni_moe"); errors name `source` and the key. Absent keys take transformers' defaults.
VisionConfig vision_config_from_json(const nlohmann::json& vision_config, const std::string& model_type_of_parent,
                                     const std::string& source);
// From a whole HF config.json (file or directory): vision_config of qwen3_vl / qwen3_vl_moe, or
// thinker_config.vision_config of qwen3_omni_moe. Other model types are an InputError.
VisionConfig load_vision_config(const std::string& path);
// The checks vision_config_from_json makes; errors name `source`.
void validate_vision_config(const VisionConfig& config, const std::string& source);

}  // namespace veomni
