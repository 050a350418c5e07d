// Declarative YAML configs: a table of dotted keys bound to struct members, loaded from YAML, overridden from the
// command line (--a.b.c value), written back as YAML.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "core/error.h"

namespace veomni {

enum class ConfigType { Bool, Int, Double, String, IntList, DoubleList, StringList };

// The alternatives follow ConfigType's order.
using ConfigValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                                 std::vector<std::string>>;

// "bool", "int", "float", "string", "list of int", "list of float", "list of string".
const char* config_type_name(ConfigType type);

// Settings of one key beyond its type.
struct ConfigFieldOptions {
  std::vector<std::string> choices;        // allowed values of a string key; empty = any string
  std::optional<std::string> null_means;   // the text a YAML null stands for (e.g. "-1"); strings and lists always
                                           // accept null (as "" and []), other types only when this is set
  bool mapping_items = false;              // a list of strings whose items may also be mappings ({path: a, weight:
                                           // 2}), each kept as its YAML flow text for the owner to parse
};

struct ConfigFieldSpec {
  std::string key;  // dotted path, e.g. "train.optimizer.lr"
  ConfigType type;
  std::string help;
  ConfigFieldOptions options;
};

// One value destined for one field (an index into the spec list), and where it came from for later messages.
struct ConfigAssignment {
  size_t field = 0;
  ConfigValue value;
  std::string origin;  // "cfg.yaml line 12" or "command line --train.optimizer.lr"
};

// Parses YAML text (nested mappings, e.g. train: {optimizer: {lr: 1e-4}}) against the fields. Throws InputError for
// invalid YAML, an unknown key (with the closest known key as a suggestion), a duplicate key, or a value that is
// not of the key's type or not among its choices; messages name `source` and the line.
std::vector<ConfigAssignment> parse_yaml_assignments(std::string_view text, const std::string& source,
                                                     const std::vector<ConfigFieldSpec>& fields);

// Parses command-line overrides: "--key value", "--key=value"; a bool key alone means true; a list key takes the
// following values up to the next "--" argument, each of which may also be comma separated or in [brackets].
std::vector<ConfigAssignment> parse_override_assignments(const std::vector<std::string>& args,
                                                         const std::vector<ConfigFieldSpec>& fields);

// YAML text of every field with its value, nested by section in the fields' order; loads back to the same values.
std::string format_config_yaml(const std::vector<ConfigFieldSpec>& fields, const std::vector<ConfigValue>& values);

// One value as YAML flow text: true, 8, 0.0001, "text", [0.9, 0.95].
std::string format_config_value(const ConfigValue& value);

// The known key closest to `key` (edit distance, or the same last component), or "" when none is close.
std::string closest_config_key(const std::string& key, const std::vector<ConfigFieldSpec>& fields);

template <class T>
constexpr ConfigType config_type_of() {
  if constexpr (std::is_same_v<T, bool>) return ConfigType::Bool;
  else if constexpr (std::is_same_v<T, int64_t>) return ConfigType::Int;
  else if constexpr (std::is_same_v<T, double>) return ConfigType::Double;
  else if constexpr (std::is_same_v<T, std::string>) return ConfigType::String;
  else if constexpr (std::is_same_v<T, std::vector<int64_t>>) return ConfigType::IntList;
  else if constexpr (std::is_same_v<T, std::vector<double>>) return ConfigType::DoubleList;
  else if constexpr (std::is_same_v<T, std::vector<std::string>>) return ConfigType::StringList;
  else static_assert(!sizeof(T), "config fields are bool, int64_t, double, std::string or vectors of the last three");
}

// The schema of a config struct Root: one add() per key, binding it to a member through an accessor written as a
// generic lambda, [](auto& c) -> auto& { return c.train.optimizer.lr; }, so that it serves const and non-const
// access. The default of a key is the member's initial value in a default-constructed Root.
template <class Root>
class ConfigSchema {
 public:
  template <class Accessor>
  ConfigSchema& add(std::string key, Accessor accessor, std::string help, ConfigFieldOptions options = {}) {
    using T = std::remove_cvref_t<decltype(accessor(std::declval<Root&>()))>;
    VEOMNI_CHECK(!has_field(key), "config key '{}' is declared twice", key);
    specs_.push_back(ConfigFieldSpec{std::move(key), config_type_of<T>(), std::move(help), std::move(options)});
    getters_.push_back([accessor](const Root& root) { return ConfigValue(std::in_place_type<T>, accessor(root)); });
    setters_.push_back([accessor](Root& root, const ConfigValue& value) { accessor(root) = std::get<T>(value); });
    return *this;
  }

  const std::vector<ConfigFieldSpec>& fields() const { return specs_; }

  bool has_field(const std::string& key) const {
    for (const ConfigFieldSpec& spec : specs_)
      if (spec.key == key) return true;
    return false;
  }

  void apply(Root& root, const std::vector<ConfigAssignment>& assignments) const {
    for (const ConfigAssignment& a : assignments) {
      VEOMNI_CHECK(a.field < setters_.size() && a.value.index() == static_cast<size_t>(specs_[a.field].type),
                   "assignment of {} does not match the schema", a.origin);
      setters_[a.field](root, a.value);
    }
  }

  std::vector<ConfigValue> values(const Root& root) const {
    std::vector<ConfigValue> out;
    out.reserve(getters_.size());
    for (const auto& get : getters_) out.push_back(get(root));
    return out;
  }

  void load_yaml(Root& root, std::string_view text, const std::string& source) const {
    apply(root, parse_yaml_assignments(text, source, specs_));
  }
  void apply_overrides(Root& root, const std::vector<std::string>& args) const {
    apply(root, parse_override_assignments(args, specs_));
  }
  std::string to_yaml(const Root& root) const { return format_config_yaml(specs_, values(root)); }

 private:
  std::vector<ConfigFieldSpec> specs_;
  std::vector<std::function<ConfigValue(const Root&)>> getters_;
  std::vector<std::function<void(Root&, const ConfigValue&)>> setters_;
};

}  // namespace veomni
