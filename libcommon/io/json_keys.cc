// Typed JSON key reads with errors that name the file and the key.
#include "io/json_keys.h"

#include "io/json_file.h"

namespace veomni {

using nlohmann::json;

bool JsonKeys::has(const char* key) const { return object_.contains(key) && !object_.at(key).is_null(); }

int64_t JsonKeys::integer(const char* key, int64_t fallback) const {
  if (!has(key)) return fallback;
  const json& v = object_.at(key);
  if (!v.is_number_integer()) throw wrong(key, "an integer", v);
  return v.get<int64_t>();
}

double JsonKeys::number(const char* key, double fallback) const {
  if (!has(key)) return fallback;
  const json& v = object_.at(key);
  if (!v.is_number()) throw wrong(key, "a number", v);
  return v.get<double>();
}

std::string JsonKeys::string(const char* key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  const json& v = object_.at(key);
  if (!v.is_string()) throw wrong(key, "a string", v);
  return v.get<std::string>();
}

std::vector<int64_t> JsonKeys::integers(const char* key, const std::vector<int64_t>& fallback) const {
  if (!has(key)) return fallback;
  const json& v = object_.at(key);
  if (!v.is_array()) throw wrong(key, "a list of integers", v);
  std::vector<int64_t> out;
  for (const json& item : v) {
    if (!item.is_number_integer()) throw wrong(key, "a list of integers", v);
    out.push_back(item.get<int64_t>());
  }
  return out;
}

int64_t JsonKeys::square_size(const char* key, int64_t fallback) const {
  if (has(key) && object_.at(key).is_array()) {
    const std::vector<int64_t> sizes = integers(key, {});
    if (sizes.empty() || sizes.front() != sizes.back())
      throw InputError(fmt::format("{}: key '{}': only square sizes are supported, got {}", source_, key,
                                   object_.at(key).dump()));
    return sizes.front();
  }
  return integer(key, fallback);
}

const json& JsonKeys::object(const char* key) const {
  if (!has(key)) throw InputError(fmt::format("{}: key '{}' is missing", source_, key));
  const json& v = object_.at(key);
  if (!v.is_object()) throw wrong(key, "an object", v);
  return v;
}

InputError JsonKeys::wrong(const char* key, const char* expected, const json& value) const {
  return InputError(fmt::format("{}: key '{}': expected {}, got {}", source_, key, expected,
                                quoted_excerpt(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))));
}

void require_positive_key(int64_t value, const char* key, const std::string& source) {
  VEOMNI_INPUT_CHECK(value > 0, "{}: key '{}' must be positive, got {}", source, key, value);
}

}  // namespace veomni
