// DType names, sizes and half-precision conversion.
#include "core/dtype.h"

#include <cmath>

#include "core/error.h"

namespace veomni {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::U8: return 1;
    case DType::Bool: return 1;
  }
  VEOMNI_CHECK(false, "unknown dtype {}", static_cast<int>(dtype));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U8: return "u8";
    case DType::Bool: return "bool";
  }
  return "?";
}

DType dtype_from_name(std::string_view name) {
  if (name == "f32" || name == "float32" || name == "fp32" || name == "float" || name == "F32") return DType::F32;
  if (name == "bf16" || name == "bfloat16" || name == "BF16") return DType::BF16;
  if (name == "f16" || name == "float16" || name == "fp16" || name == "half" || name == "F16") return DType::F16;
  if (name == "i32" || name == "int32" || name == "I32") return DType::I32;
  if (name == "i64" || name == "int64" || name == "I64") return DType::I64;
  if (name == "u8" || name == "uint8" || name == "U8") return DType::U8;
  if (name == "bool" || name == "BOOL") return DType::Bool;
  throw InputError(fmt::format("unknown dtype '{}' (expected one of f32, bf16, f16, i32, i64, u8, bool)", name));
}

bool dtype_is_floating(DType dtype) { return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16; }

float f16_to_float(f16 v) {
  const uint32_t sign = (v.bits >> 15) & 1u;
  const uint32_t exponent = (v.bits >> 10) & 0x1fu;
  const uint32_t mantissa = v.bits & 0x3ffu;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa ? NAN : INFINITY;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  }
  return sign ? -magnitude : magnitude;
}

f16 float_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const int32_t exponent = static_cast<int32_t>((u >> 23) & 0xffu) - 127 + 15;
  uint32_t mantissa = u & 0x7fffffu;
  if (((u >> 23) & 0xffu) == 0xffu) return f16{static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u : 0))};
  if (exponent >= 31) return f16{static_cast<uint16_t>(sign | 0x7c00u)};
  if (exponent <= 0) {
    if (exponent < -10) return f16{static_cast<uint16_t>(sign)};
    mantissa |= 0x800000u;
    const int shift = 14 - exponent;
    uint32_t half_mantissa = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half_mantissa & 1u))) ++half_mantissa;
    return f16{static_cast<uint16_t>(sign | half_mantissa)};
  }
  uint32_t bits = sign | (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
  const uint32_t remainder = mantissa & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (bits & 1u))) ++bits;  // may carry into the exponent: correct
  return f16{static_cast<uint16_t>(bits)};
}

}  // namespace veomni
