// The declarative config key table (io/yaml_config.h) read from and written to a flat JSON object, as HuggingFace's
// config.json keeps its keys: the same types and checks as YAML configs.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "io/yaml_config.h"

namespace veomni {

// One assignment per field whose key the object has at its top level (absent or null keys are left out: the field
// keeps its default, as Python's None gives a transformers config class's default). Only fields for which `wanted`
// says true are read. A value of the wrong type throws InputError "<source>: key '<key>': expected an integer, got
// <v>" (a number, true or false, a string, a list of ...); an int key takes only integers, a float key any number, a string key's value must be among its choices.
std::vector<ConfigAssignment> json_assignments(const nlohmann::json& object, const std::string& source,
                                               const std::vector<ConfigFieldSpec>& fields,
                                               const std::function<bool(size_t)>& wanted);

// The JSON form of a value: true, 8, 0.0001, "text", [1, 2].
nlohmann::json config_value_json(const ConfigValue& value);

}  // namespace veomni
