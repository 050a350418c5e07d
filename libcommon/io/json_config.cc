// Reading and writing the config key table's values as top-level keys of a JSON object.
#include "io/json_config.h"

#include <spdlog/fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"

namespace veomni {

namespace {

using nlohmann::json;

// What a JSON value of the type looks like, in the words of config.json's readers.
const char* expected_json(ConfigType type) {
  switch (type) {
    case ConfigType::Bool: return "true or false";
    case ConfigType::Int: return "an integer";
    case ConfigType::Double: return "a number";
    case ConfigType::String: return "a string";
    case ConfigType::IntList: return "a list of integers";
    case ConfigType::DoubleList: return "a list of numbers";
    case ConfigType::StringList: return "a list of strings";
  }
  return "a value";
}

InputError wrong_type(const std::string& source, const ConfigFieldSpec& spec, const json& value) {
  return InputError(fmt::format("{}: key '{}': expected {}, got {}", source, spec.key, expected_json(spec.type),
                                quoted_excerpt(value.dump(-1, ' ', false, json::error_handler_t::replace))));
}

template <class T>
std::vector<T> list_of(const json& value, bool (json::*is_item)() const noexcept, const std::string& source,
                       const ConfigFieldSpec& spec) {
  if (!value.is_array()) throw wrong_type(source, spec, value);
  std::vector<T> out;
  for (const json& item : value) {
    if (!(item.*is_item)()) throw wrong_type(source, spec, value);
    out.push_back(item.get<T>());
  }
  return out;
}

ConfigValue value_of(const json& value, const std::string& source, const ConfigFieldSpec& spec) {
  switch (spec.type) {
    case ConfigType::Bool:
      if (!value.is_boolean()) throw wrong_type(source, spec, value);
      return value.get<bool>();
    case ConfigType::Int:
      if (!value.is_number_integer()) throw wrong_type(source, spec, value);
      return value.get<int64_t>();
    case ConfigType::Double:
      if (!value.is_number()) throw wrong_type(source, spec, value);
      return value.get<double>();
    case ConfigType::String: {
      if (!value.is_string()) throw wrong_type(source, spec, value);
      std::string text = value.get<std::string>();
      const auto& choices = spec.options.choices;
      if (!choices.empty() && std::find(choices.begin(), choices.end(), text) == choices.end())
        throw InputError(fmt::format("{}: key '{}': \"{}\" is not supported (supported: {})", source, spec.key, text,
                                     fmt::join(choices, ", ")));
      return text;
    }
    case ConfigType::IntList:
      return list_of<int64_t>(value, &json::is_number_integer, source, spec);
    case ConfigType::DoubleList:
      return list_of<double>(value, &json::is_number, source, spec);
    case ConfigType::StringList:
      return list_of<std::string>(value, &json::is_string, source, spec);
  }
  VEOMNI_CHECK(false, "config type {}", static_cast<int>(spec.type));
  __builtin_unreachable();
}

}  // namespace

std::vector<ConfigAssignment> json_assignments(const json& object, const std::string& source,
                                               const std::vector<ConfigFieldSpec>& fields,
                                               const std::function<bool(size_t)>& wanted) {
  VEOMNI_INPUT_CHECK(object.is_object(), "{}: expected a JSON object, got {}", source, object.type_name());
  std::vector<ConfigAssignment> out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (!wanted(i)) continue;
    const auto it = object.find(fields[i].key);
    if (it == object.end() || it->is_null()) continue;
    out.push_back({i, value_of(*it, source, fields[i]), fmt::format("{} key '{}'", source, fields[i].key)});
  }
  return out;
}

json config_value_json(const ConfigValue& value) {
  return std::visit([](const auto& v) { return json(v); }, value);
}

}  // namespace veomni
