// Reference log-probabilities of a preference record.
#include "data/preference_record.h"

#include <cmath>

#include "core/error.h"

namespace veomni {

float record_ref_logps(const nlohmann::json& record, const char* key) {
  const nlohmann::json& value = record[key];
  VEOMNI_INPUT_CHECK(value.is_number(), "\"{}\" is {}, expected a number", key, value.type_name());
  const auto f = static_cast<float>(value.get<double>());
  VEOMNI_INPUT_CHECK(std::isfinite(f), "\"{}\" is {}, which is not finite as a 32-bit float", key, value.dump());
  return f;
}

}  // namespace veomni
