// Names, format version and value checks of the preference and rollout dataset keys.
#include "data/dataset_objective_keys.h"

#include <algorithm>
#include <cmath>

#include <spdlog/fmt/ranges.h>

#include "core/error.h"
#include "data/dataset_reader.h"

namespace veomni {

bool is_rollout_key(std::string_view name) {
  return std::any_of(kRolloutKeys.begin(), kRolloutKeys.end(), [&](const char* key) { return name == key; });
}

bool is_pair_key(std::string_view name) {
  return name == kChosenLengthKey || name == kRefChosenLogpsKey || name == kRefRejectedLogpsKey;
}

int64_t dataset_format_version_for(const std::vector<std::string>& key_names) {
  const bool objective_keys = std::any_of(key_names.begin(), key_names.end(), [](const std::string& name) {
    return is_rollout_key(name) || is_pair_key(name);
  });
  return objective_keys ? 2 : 1;
}

void require_dataset_keys(const DatasetReader& reader, const std::vector<std::string>& keys, std::string_view purpose) {
  for (const std::string& key : keys) {
    if (reader.has_key(key)) continue;
    std::vector<std::string> present;
    for (const KeyInfo& info : reader.keys()) present.push_back(info.name);
    throw InputError(fmt::format("{}: no key '{}', which {} needs (keys: {}; see man veomni-data)",
                                 reader.shards().front().path, key, purpose, fmt::join(present, ", ")));
  }
}

void check_finite_values(const Tensor& values, std::string_view key, std::string_view context) {
  VEOMNI_CHECK(values.dtype() == DType::F32, "check_finite_values on {}", values.describe());
  const float* p = values.data<float>();
  for (int64_t i = 0; i < values.numel(); ++i)
    VEOMNI_INPUT_CHECK(std::isfinite(p[i]), "{}: key '{}'[{}] = {} is not finite", context, key, i, p[i]);
}

}  // namespace veomni
