// Typed reads of one JSON object's keys (HF config.json sections): absent or null keys give the fallback, as Python's
// None does; a value of the wrong type is an InputError naming the source and the key.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace veomni {

class JsonKeys {
 public:
  JsonKeys(const nlohmann::json& object, std::string source) : object_(object), source_(std::move(source)) {}

  bool has(const char* key) const;
  int64_t integer(const char* key, int64_t fallback) const;
  double number(const char* key, double fallback) const;
  std::string string(const char* key, const std::string& fallback) const;
  std::vector<int64_t> integers(const char* key, const std::vector<int64_t>& fallback) const;
  // A size written as an int or a [p, p] list (transformers' type hint for patch_size); only square sizes exist.
  int64_t square_size(const char* key, int64_t fallback) const;
  // A nested object that must be present.
  const nlohmann::json& object(const char* key) const;

 private:
  InputError wrong(const char* key, const char* expected, const nlohmann::json& value) const;

  const nlohmann::json& object_;
  std::string source_;
};

// InputError "<source>: key '<key>' must be positive, got <value>" unless value > 0.
void require_positive_key(int64_t value, const char* key, const std::string& source);

}  // namespace veomni
