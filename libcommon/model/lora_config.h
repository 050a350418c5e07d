// LoRA settings (VeOmni's model.lora_config): the adapters' rank and scale, and which projections get one.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace veomni {

// LoRA on a projection W [out, in]: y = x W^T + scale * (x A^T) B^T with A [rank, in] (kaiming-uniform, as PEFT)
// and B [out, rank] (zeros), W frozen. MoE experts take one adapter per expert weight tensor, as PEFT's
// target_parameters does: gate_up_proj [E, 2I, H] gets A [E, rank, H], B [E, 2I, rank]; down_proj [E, H, I] gets
// A [E, rank, I], B [E, H, rank]; share_expert_lora: one A [rank, in] and B [out, rank] shared by a layer's experts.
struct LoraConfig {
  int64_t rank = 0;  // the adapters' rank r; 0: no LoRA (full fine-tuning)
  double alpha = 8;  // scale = alpha / r (alpha / sqrt(r) with use_rslora); VeOmni's and PEFT's default
  bool use_rslora = false;
  // Module names, PEFT's list semantics: an entry matches a module whose name is the entry or ends with "." + entry
  // (q_proj matches model.layers.3.self_attn.q_proj, and in Qwen3-Omni the audio encoder's q_proj too). In an MoE
  // layer gate_proj / up_proj select the experts' fused gate_up_proj (both must be listed), down_proj the experts'
  // down_proj. Vision tower modules: attn.qkv, attn.proj, mlp.linear_fc1, mlp.linear_fc2.
  std::vector<std::string> lora_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  // A regular expression (ECMAScript, full match, as PEFT's string form) of module names that get no adapter even
  // when lora_modules matches them, e.g. ".*(visual|audio_tower).*" for the language model only; "" excludes none.
  std::string exclude_modules;
  bool share_expert_lora = false;  // one adapter per MoE layer shared by its experts (else one per expert)

  bool enabled() const { return rank > 0; }
  // alpha / rank, or alpha / sqrt(rank) with use_rslora.
  double scale() const;
  // The rank and scale of the adapter on `module`: rank and scale() for every module but an experts' fused
  // gate_up_proj selected through gate_proj and up_proj, whose adapter stands for both, as PEFT makes it: rank 2r
  // with alpha 2*alpha (the same scale; sqrt(2) times it with use_rslora).
  int64_t rank_of(const std::string& module) const;
  double scale_of(const std::string& module) const;
  // Whether the module `module` (a weight's HF name without ".weight", e.g. model.layers.0.self_attn.q_proj, or
  // model.layers.0.mlp.experts.gate_up_proj) gets an adapter. Expert tensors match through the names above.
  bool targets(const std::string& module) const;
  // The lora_modules entries that match none of `modules` (every adapter-capable module of the model): a typo.
  std::vector<std::string> unmatched_entries(const std::vector<std::string>& modules) const;
  // InputError naming `<section>.<key>`: negative rank, alpha <= 0, an empty or blank entry, a bad regex, and keys
  // set to non-defaults while rank is 0 (a section that forgot its rank).
  void validate(std::string_view section = "model.lora_config") const;

  bool operator==(const LoraConfig&) const = default;
};

}  // namespace veomni
