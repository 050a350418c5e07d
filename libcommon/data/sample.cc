// Lookup and description of sample tensors.
#include "data/sample.h"

#include <spdlog/fmt/ranges.h>

#include <vector>

namespace veomni {

namespace {

std::vector<std::string> key_names(const Sample& sample) {
  std::vector<std::string> names;
  for (const auto& entry : sample) names.push_back(entry.first);
  return names;
}

}  // namespace

const Tensor& sample_key(const Sample& sample, const std::string& key, const std::string& context) {
  const auto found = sample.find(key);
  if (found == sample.end())
    throw InputError(fmt::format("{}: no key '{}' (keys: {})", context, key, fmt::join(key_names(sample), ", ")));
  return found->second;
}

std::string describe_sample(const Sample& sample) {
  std::vector<std::string> parts;
  for (const auto& [key, tensor] : sample)
    parts.push_back(fmt::format("{} {}{}", key, dtype_name(tensor.dtype()), shape_str(tensor.shape())));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace veomni
