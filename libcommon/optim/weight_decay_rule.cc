// Weight-decay exclusion by module type or parameter-name substring.
#include "optim/weight_decay_rule.h"

#include <spdlog/fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace veomni {

namespace {

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// The dotted name's components.
std::vector<std::string> components(const std::string& name) {
  std::vector<std::string> out;
  size_t begin = 0;
  for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', begin)) {
    out.push_back(name.substr(begin, dot - begin));
    begin = dot + 1;
  }
  out.push_back(name.substr(begin));
  return out;
}

// "RMSNorm" matches "RMSNorm" and "Qwen3RMSNorm"; not "LayerNorm" or "Norm".
bool names_module_type(const std::string& entry, const std::string& type) {
  return entry == type || (entry.starts_with("Qwen") && entry.ends_with(type));
}

bool names_parameter(const std::string& entry, const std::string& hf_name) {
  return lowercase(hf_name).find(lowercase(entry)) != std::string::npos;
}

}  // namespace

std::string module_type_of(const std::string& hf_name) {
  const std::vector<std::string> parts = components(hf_name);
  // A stacked expert tensor is the experts module's own parameter (no ".weight").
  if (parts.size() >= 2 && parts[parts.size() - 2] == "experts") return "Experts";
  const std::string module = parts.size() >= 2 ? parts[parts.size() - 2] : "";
  const bool tower = hf_name.starts_with("visual.") || hf_name.starts_with("audio_tower.") ||
                     hf_name.find(".visual.") != std::string::npos ||
                     hf_name.find(".audio_tower.") != std::string::npos;
  if (module.find("norm") != std::string::npos || module.starts_with("ln_")) return tower ? "LayerNorm" : "RMSNorm";
  if (module == "embed_tokens" || module == "pos_embed") return "Embedding";
  if (hf_name.find("patch_embed.proj.") != std::string::npos) return "Conv3d";
  if (module.starts_with("conv2d")) return "Conv2d";
  return "Linear";
}

bool WeightDecayRule::decays(const std::string& hf_name) const {
  const std::string type = module_type_of(hf_name);
  for (const std::string& entry : no_decay_modules)
    if (names_module_type(entry, type)) return false;
  for (const std::string& entry : no_decay_params)
    if (names_parameter(entry, hf_name)) return false;
  return true;
}

void WeightDecayRule::check_matches(const std::vector<std::string>& names) const {
  std::vector<std::string> types;
  for (const std::string& name : names) {
    const std::string type = module_type_of(name);
    if (std::find(types.begin(), types.end(), type) == types.end()) types.push_back(type);
  }
  for (const std::string& entry : no_decay_modules)
    VEOMNI_INPUT_CHECK(std::any_of(types.begin(), types.end(),
                                   [&](const std::string& type) { return names_module_type(entry, type); }),
                       "train.optimizer.no_decay_modules: '{}' names no module type of this model (it has: {}) "
                       "(hint: a type such as RMSNorm, or with the model's prefix, Qwen3RMSNorm)",
                       entry, fmt::join(types, ", "));
  for (const std::string& entry : no_decay_params)
    VEOMNI_INPUT_CHECK(std::any_of(names.begin(), names.end(),
                                   [&](const std::string& name) { return names_parameter(entry, name); }),
                       "train.optimizer.no_decay_params: '{}' is part of no parameter name of this model, e.g. '{}' "
                       "(hint: a case-insensitive substring such as bias, norm or embed_tokens)",
                       entry, names.empty() ? std::string() : names.front());
}

}  // namespace veomni
