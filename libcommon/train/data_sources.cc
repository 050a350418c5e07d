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

bool is_multisource_file(const std::string& path) {
  const std::string extension = std::filesystem::path(path).extension().string();
  return extension == ".yaml" || extension == ".yml";
}

namespace {

std::vector<std::string> string_list(const YAML::Node& root, const char* key, const std::string& file) {
  std::vector<std::string> out;
  const YAML::Node node = root[key];
  if (!node) return out;
  VEOMNI_INPUT_CHECK(node.IsSequence(), "{}: key '{}' must be a list", file, key);
  for (const YAML::Node& item : node) {
    VEOMNI_INPUT_CHECK(item.IsScalar(), "{}: key '{}' must list plain values", file, key);
    out.push_back(item.Scalar());
  }
  return out;
}

// The one const phase's weights (all 1 without a schedule).
std::vector<double> schedule_weights(const YAML::Node& root, size_t sources, const std::string& file) {
  const YAML::Node schedule = root["schedule"];
  if (!schedule) return std::vector<double>(sources, 1.0);
  VEOMNI_INPUT_CHECK(schedule.IsSequence() && schedule.size() == 1,
                     "{}: key 'schedule' has {} entries; one phase (schedule_type const) is supported (hint: one mix "
                     "per run, or list the sources in data.datasets)",
                     file, schedule.IsSequence() ? schedule.size() : 0);
  const YAML::Node phase = schedule[0];
  const std::string type = phase["schedule_type"] ? phase["schedule_type"].as<std::string>() : "const";
  VEOMNI_INPUT_CHECK(type == "const", "{}: key 'schedule[0].schedule_type' is '{}'; only const is supported", file,
                     type);
  std::vector<double> weights;
  try {
    for (const YAML::Node& w : phase["weights"]) weights.push_back(w.as<double>());
  } catch (const YAML::Exception&) {
    throw InputError(fmt::format("{}: key 'schedule[0].weights' must be a list of numbers", file));
  }
  VEOMNI_INPUT_CHECK(weights.size() == sources, "{}: key 'schedule[0].weights' has {} values for {} sources", file,
                     weights.size(), sources);
  return weights;
}

}  // namespace

std::vector<DataSourceSpec> read_multisource_file(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw InputError(fmt::format("{}: cannot read the multisource file (data.train_path)", path));
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}: invalid YAML: {}", path, e.msg));
  }
  VEOMNI_INPUT_CHECK(root.IsMap(), "{}: a multisource file is a mapping with 'sources' (and 'names', 'schedule')",
                     path);
  const std::vector<std::string> paths = string_list(root, "sources", path);
  VEOMNI_INPUT_CHECK(!paths.empty(), "{}: key 'sources' is missing or empty", path);
  const std::vector<std::string> names = string_list(root, "names", path);
  VEOMNI_INPUT_CHECK(names.empty() || names.size() == paths.size(), "{}: key 'names' has {} entries for {} sources",
                     path, names.size(), paths.size());
  const std::vector<double> weights = schedule_weights(root, paths.size(), path);
  std::vector<std::string> entries;
  for (size_t i = 0; i < paths.size(); ++i) {
    YAML::Emitter entry;
    entry << YAML::Flow << YAML::BeginMap << YAML::Key << "path" << YAML::Value << paths[i] << YAML::Key << "weight"
          << YAML::Value << weights[i];
    if (!names.empty()) entry << YAML::Key << "name" << YAML::Value << names[i];
    entry << YAML::EndMap;
    entries.push_back(entry.c_str());
  }
  try {
    return parse_data_sources(entries);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{} (read as data.datasets): {}", path, e.what()));
  }
}

std::string data_source_text(const DataSourceSpec& source) {
  return fmt::format("{{path: {}, weight: {}, name: {}}}", source.path, source.weight, source.name);
}

}  // namespace veomni
