// LoRA settings: the scale, PEFT's module-name matching and the checks of model.lora_config.
#include "model/lora_config.h"

#include <cmath>
#include <regex>

#include <fmt/format.h>

#include "core/error.h"

namespace veomni {

namespace {

constexpr std::string_view kExpertsGateUp = ".experts.gate_up_proj";

// PEFT's list semantics: the whole name, or its last dot-separated components.
bool entry_matches(const std::string& module, const std::string& entry) {
  if (module == entry) return true;
  return module.size() > entry.size() && module.ends_with(entry) && module[module.size() - entry.size() - 1] == '.';
}

bool any_entry_matches(const std::vector<std::string>& entries, const std::string& module) {
  for (const std::string& entry : entries)
    if (entry_matches(module, entry)) return true;
  return false;
}

// The dense names an experts' fused gate_up_proj stands for: <layer>.mlp.experts.{gate_proj, up_proj}.
std::pair<std::string, std::string> fused_gate_up_names(const std::string& module) {
  const std::string experts = module.substr(0, module.size() - std::string_view("gate_up_proj").size());
  return {experts + "gate_proj", experts + "up_proj"};
}

bool is_experts_gate_up(const std::string& module) { return module.ends_with(kExpertsGateUp); }

}  // namespace

double LoraConfig::scale() const {
  const auto r = static_cast<double>(rank);
  return use_rslora ? alpha / std::sqrt(r) : alpha / r;
}

namespace {

// An experts' gate_up_proj adapted because both gate_proj and up_proj are listed (not by its own name).
bool fuses_gate_and_up(const LoraConfig& c, const std::string& module) {
  return is_experts_gate_up(module) && !any_entry_matches(c.lora_modules, module) && c.targets(module);
}

}  // namespace

int64_t LoraConfig::rank_of(const std::string& module) const {
  return fuses_gate_and_up(*this, module) ? 2 * rank : rank;
}

double LoraConfig::scale_of(const std::string& module) const {
  if (!fuses_gate_and_up(*this, module)) return scale();
  const auto r = static_cast<double>(2 * rank);
  return use_rslora ? 2 * alpha / std::sqrt(r) : 2 * alpha / r;
}

bool LoraConfig::targets(const std::string& module) const {
  if (!enabled()) return false;
  if (!exclude_modules.empty() && std::regex_match(module, std::regex(exclude_modules))) return false;
  if (any_entry_matches(lora_modules, module)) return true;
  if (!is_experts_gate_up(module)) return false;
  const auto [gate, up] = fused_gate_up_names(module);
  const bool has_gate = any_entry_matches(lora_modules, gate), has_up = any_entry_matches(lora_modules, up);
  VEOMNI_INPUT_CHECK(has_gate == has_up,
                     "model.lora_config.lora_modules selects {} but not {} of {}: the experts hold both in one fused "
                     "tensor, which takes one adapter (hint: list both gate_proj and up_proj, or neither)",
                     has_gate ? "gate_proj" : "up_proj", has_gate ? "up_proj" : "gate_proj", module);
  return has_gate;
}

std::vector<std::string> LoraConfig::unmatched_entries(const std::vector<std::string>& modules) const {
  std::vector<std::string> unmatched;
  for (const std::string& entry : lora_modules) {
    bool matched = false;
    for (const std::string& module : modules) {
      matched = entry_matches(module, entry);
      if (!matched && is_experts_gate_up(module)) {
        const auto [gate, up] = fused_gate_up_names(module);
        matched = entry_matches(gate, entry) || entry_matches(up, entry);
      }
      if (matched) break;
    }
    if (!matched) unmatched.push_back(entry);
  }
  return unmatched;
}

void LoraConfig::validate(std::string_view section) const {
  VEOMNI_INPUT_CHECK(rank >= 0, "{}.rank must be positive (or 0: no LoRA), got {}", section, rank);
  if (rank == 0) {
    const LoraConfig defaults;
    const LoraConfig off_with_defaults = [&] {
      LoraConfig c = defaults;
      c.rank = 0;
      return c;
    }();
    VEOMNI_INPUT_CHECK(*this == off_with_defaults,
                       "{}.rank is 0 (LoRA off) while other {} keys are set (hint: set {}.rank to the adapters' rank, "
                       "e.g. 16)",
                       section, section, section);
    return;
  }
  VEOMNI_INPUT_CHECK(std::isfinite(alpha) && alpha > 0, "{}.alpha must be positive, got {}", section, alpha);
  VEOMNI_INPUT_CHECK(!lora_modules.empty(), "{}.lora_modules is empty: LoRA needs at least one module", section);
  for (const std::string& entry : lora_modules)
    VEOMNI_INPUT_CHECK(!entry.empty() && entry.find_first_of(" \t") == std::string::npos && entry.front() != '.' &&
                           entry.back() != '.',
                       "{}.lora_modules has the entry '{}', which is no module name", section, entry);
  if (!exclude_modules.empty()) {
    try {
      std::regex check(exclude_modules);
    } catch (const std::regex_error& e) {
      throw InputError(fmt::format("{}.exclude_modules '{}' is not a regular expression: {}", section,
                                   exclude_modules, e.what()));
    }
  }
}

}  // namespace veomni
