// One element of a floating storage type (float, bf16, f16) as a float, and a float rounded into one: the scalar
// conversions the CPU loops share.
#pragma once
#include <type_traits>

#include "core/dtype.h"

namespace veomni {

// Exact for every type.
inline float to_float(float v) { return v; }
inline float to_float(bf16 v) { return bf16_to_float(v); }
inline float to_float(f16 v) { return f16_to_float(v); }

// Rounds to nearest even into bf16 and f16.
template <typename T>
T from_float(float v) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>);
  if constexpr (std::is_same_v<T, float>)
    return v;
  else if constexpr (std::is_same_v<T, bf16>)
    return float_to_bf16(v);
  else
    return float_to_f16(v);
}

}  // namespace veomni
