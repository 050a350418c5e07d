// Which parameters AdamW decays: VeOmni's train.optimizer.no_decay_modules / no_decay_params, matched against HF
// parameter names.
#pragma once
#include <string>
#include <vector>

namespace veomni {

// The module type that holds a parameter, as transformers names its class without the model family's prefix:
// "RMSNorm" (the language model's norms), "LayerNorm" (the vision tower's and the audio encoder's), "Embedding",
// "Conv3d" (the vision patch embedding), "Conv2d" (the audio encoder's input convolutions), "Experts" (a MoE
// layer's stacked expert tensors) or "Linear" (every other projection, LoRA's lora_A / lora_B included).
std::string module_type_of(const std::string& hf_name);

// A parameter is excluded from weight decay when
//   - an entry of no_decay_modules names the type of the module holding it: the type itself ("RMSNorm") or the
//     type with a model-family prefix, as transformers spells its classes ("Qwen3RMSNorm", "Qwen3MoeRMSNorm"), or
//   - an entry of no_decay_params is a substring of its name, case-insensitively ("bias", "norm", "embed_tokens").
// The default (no_decay_params [bias, norm]) leaves norms and biases undecayed, the HF Trainer's convention.
struct WeightDecayRule {
  std::vector<std::string> no_decay_modules;
  std::vector<std::string> no_decay_params = {"bias", "norm"};

  bool operator==(const WeightDecayRule&) const = default;
  bool decays(const std::string& hf_name) const;
  // Every entry must match at least one of `names` (the model's parameters): otherwise InputError naming the key
  // (train.optimizer.no_decay_modules / no_decay_params) and the entry, with a hint.
  void check_matches(const std::vector<std::string>& names) const;
};

}  // namespace veomni
