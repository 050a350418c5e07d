// VEOMNI_* environment variables applied to the run config through the config's own key table.
#include "train/environment_overrides.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "dist/collective_timeout.h"

namespace veomni {

namespace {

const ConfigFieldSpec& field_of(const char* key) {
  for (const ConfigFieldSpec& spec : train_config_schema().fields())
    if (spec.key == key) return spec;
  VEOMNI_CHECK(false, "environment override of an unknown config key {}", key);
  __builtin_unreachable();
}

std::string value_text(const TrainConfig& config, const char* key) {
  const auto& fields = train_config_schema().fields();
  const std::vector<ConfigValue> values = train_config_schema().values(config);
  for (size_t i = 0; i < fields.size(); ++i)
    if (fields[i].key == key) return format_config_value(values[i]);
  return "";
}

// 0 | 1 as the key's false | true; anything else is refused (a typo must not silently mean "off").
std::string switch_value(const EnvironmentOverride& o, const char* text) {
  if (std::strcmp(text, "1") == 0) return "true";
  if (std::strcmp(text, "0") == 0) return "false";
  throw InputError(fmt::format("environment variable {}='{}': expected 0 or 1 (it sets {})", o.variable, text, o.key));
}

}  // namespace

const std::vector<EnvironmentOverride>& environment_overrides() {
  static const std::vector<EnvironmentOverride> table = {
      {"VEOMNI_ATTENTION_BACKEND", "train.kernels.attention_backend", false},
      {"VEOMNI_GEMM_AUTOTUNE", "train.kernels.gemm_autotune", true},
      {"VEOMNI_GROUPED_GEMM", "train.kernels.grouped_gemm", false},
      {"VEOMNI_DEBUG_CHECKS", "train.kernels.debug_checks", true},
      {"VEOMNI_PROFILE_OPS", "train.op_profile.enable", true},
      {"VEOMNI_PROFILE_OPS_OUT", "train.op_profile.out", false},
      {"VEOMNI_PROFILE_OPS_SKIP_STEPS", "train.op_profile.skip_steps", false},
      {kCollectiveTimeoutEnv, "train.accelerator.dist_timeout", false},
  };
  return table;
}

std::vector<std::string> apply_environment_overrides(TrainConfig& config, const EnvironmentLookup& lookup) {
  std::vector<std::string> log;
  for (const EnvironmentOverride& o : environment_overrides()) {
    const char* text = lookup(o.variable);
    if (text == nullptr || *text == '\0') continue;
    const std::string before = value_text(config, o.key);
    const std::string value = o.is_switch ? switch_value(o, text) : std::string(text);
    try {
      apply_train_config_overrides(config, {fmt::format("--{}={}", o.key, value)});
    } catch (const InputError& e) {
      const ConfigFieldSpec& spec = field_of(o.key);
      throw InputError(fmt::format("environment variable {}='{}' (it sets {}, a {}): {}", o.variable, text, o.key,
                                   config_type_name(spec.type), e.what()));
    }
    const std::string after = value_text(config, o.key);
    if (after != before) log.push_back(fmt::format("{}={} overrides {} (was {})", o.variable, text, o.key, before));
  }
  return log;
}

std::vector<std::string> apply_environment_overrides(TrainConfig& config) {
  return apply_environment_overrides(config, [](const char* name) { return std::getenv(name); });
}

}  // namespace veomni
