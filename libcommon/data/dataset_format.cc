// Key schema helpers and shard file naming of the dataset format.
#include "data/dataset_format.h"

#include <spdlog/fmt/ranges.h>

#include <regex>
#include <vector>

#include "core/error.h"

namespace veomni {

Shape KeyInfo::sample_shape(int64_t length) const {
  Shape out = shape;
  out[static_cast<size_t>(var_axis)] = length;
  return out;
}

std::string KeyInfo::describe() const {
  std::vector<std::string> dims;
  for (size_t axis = 0; axis < shape.size(); ++axis)
    dims.push_back(static_cast<int>(axis) == var_axis ? "L" : std::to_string(shape[axis]));
  return fmt::format("{}[{}]", dtype_name(dtype), fmt::join(dims, ", "));
}

int default_var_axis(std::string_view key, int ndim) { return key == "position_ids" && ndim >= 2 ? ndim - 1 : 0; }

void validate_dataset_kind(std::string_view kind, std::string_view context) {
  if (kind == "text" || kind == "vl" || kind == "omni") return;
  throw InputError(fmt::format("{}: unknown dataset kind '{}' (expected text, vl or omni)", context, kind));
}

std::string shard_file_name(const std::string& stem, int64_t index, int64_t count) {
  return fmt::format("{}-{:05d}-of-{:05d}.h5", stem, index, count);
}

std::optional<ShardFileName> parse_shard_file_name(const std::string& path) {
  static const std::regex pattern(R"(^(.*)-([0-9]{5,})-of-([0-9]{5,})\.h5$)");
  std::smatch match;
  if (!std::regex_match(path, match, pattern)) return std::nullopt;
  ShardFileName name{match[1].str(), std::stoll(match[2].str()), std::stoll(match[3].str())};
  if (name.count < 1 || name.index >= name.count) return std::nullopt;
  return name;
}

}  // namespace veomni
