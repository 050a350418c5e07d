// The VEOMNI_* environment variables that override config keys: their table, and applying them to a TrainConfig so
// the saved veomni_cli.yaml records what the run really used.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "train/train_config.h"

namespace veomni {

// One environment variable and the key it overrides.
struct EnvironmentOverride {
  const char* variable;  // e.g. VEOMNI_ATTENTION_BACKEND
  const char* key;       // e.g. train.kernels.attention_backend
  bool is_switch;        // 0 | 1 values (written as false | true for the key)
};

// Every variable that overrides a key, in the order they are applied.
const std::vector<EnvironmentOverride>& environment_overrides();

// Reads a variable: its value, or nullptr when it is unset. Tests pass a fake one.
using EnvironmentLookup = std::function<const char*(const char*)>;

// Sets each key whose variable is set (and not empty) to the variable's value, checked as the key's values are
// (type, choices); a bad value throws InputError naming the variable, its value and what the key accepts. Returns
// one line per override for the log: "VEOMNI_X=v overrides train.k (was w)".
std::vector<std::string> apply_environment_overrides(TrainConfig& config, const EnvironmentLookup& lookup);
// The same, reading the process environment.
std::vector<std::string> apply_environment_overrides(TrainConfig& config);

}  // namespace veomni
