// Parsing data.datasets entries with yaml-cpp; default names from the file's stem.
#include "train/data_sources.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/error.h"

namespace veomni {

namespace {

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// "data/math-00000-of-00004.h5" -> "math_00000_of_00004": the stem with other characters replaced.
std::string default_name(const std::string& path) {
  std::string stem = std::filesystem::path(path).stem().string();
  if (stem.empty()) stem = std::filesystem::path(path).parent_path().filename().string();
  for (char& c : stem)
    if (!is_name_char(c)) c = '_';
  return stem.empty() ? "source" : stem;
}

DataSourceSpec parse_entry(const std::string& text, const std::string& where) {
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}: invalid entry '{}': {}", where, text, e.msg));
  }
  DataSourceSpec source;
  if (node.IsScalar()) {
    source.path = node.Scalar();
  } else {
    VEOMNI_INPUT_CHECK(node.IsMap(), "{}: expected a mapping {{path: ..., weight: ..., name: ...}} or a path, got '{}'",
                       where, text);
    for (const auto& entry : node) {
      const std::string key = entry.first.as<std::string>();
      const YAML::Node value = entry.second;
      VEOMNI_INPUT_CHECK(value.IsScalar(), "{}.{}: expected a single value, got '{}'", where, key, text);
      if (key == "path") {
        source.path = value.Scalar();
      } else if (key == "name") {
        source.name = value.Scalar();
      } else if (key == "weight") {
        try {
          source.weight = value.as<double>();
        } catch (const YAML::Exception&) {
          throw InputError(fmt::format("{}.weight: '{}' is not a number", where, value.Scalar()));
        }
      } else {
        throw InputError(fmt::format("{}: unknown key '{}' (an entry has path, weight and name)", where, key));
      }
    }
  }
  VEOMNI_INPUT_CHECK(!source.path.empty(), "{}: no 'path' (hint: {{path: data/math.h5, weight: 1}})", where);
  VEOMNI_INPUT_CHECK(std::isfinite(source.weight) && source.weight >= 0,
                     "{}.weight: {} is not a finite weight >= 0", where, source.weight);
  if (source.name.empty()) source.name = default_name(source.path);
  for (char c : source.name)
    VEOMNI_INPUT_CHECK(is_name_char(c),
                       "{}.name: '{}' may hold letters, digits and '_' only (it names the metric loss_{})", where,
                       source.name, source.name);
  return source;
}

}  // namespace

std::vector<DataSourceSpec> parse_data_sources(const std::vector<std::string>& entries) {
  std::vector<DataSourceSpec> sources;
  std::set<std::string> names;
  double total = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string where = fmt::format("data.datasets[{}]", i);
    sources.push_back(parse_entry(entries[i], where));
    VEOMNI_INPUT_CHECK(names.insert(sources.back().name).second,
                       "{}.name: '{}' names another entry too (hint: give each entry its own 'name')", where,
                       sources.back().name);
    total += sources.back().weight;
  }
  VEOMNI_INPUT_CHECK(sources.empty() || total > 0, "data.datasets: the weights sum to 0: nothing would be drawn");
  return sources;
}

std::string data_source_text(const DataSourceSpec& source) {
  return fmt::format("{{path: {}, weight: {}, name: {}}}", source.path, source.weight, source.name);
}

}  // namespace veomni
