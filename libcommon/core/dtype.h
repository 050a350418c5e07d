// Element types of tensors and datasets, with bf16/f16 <-> f32 conversions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace veomni {

enum class DType : uint8_t { F32, BF16, F16, I32, I64, U8, Bool };

size_t dtype_size(DType dtype);
// Canonical lower-case names: "f32", "bf16", "f16", "i32", "i64", "u8", "bool".
const char* dtype_name(DType dtype);
// Accepts canonical names and common aliases (float32, bfloat16, int64, ...); throws InputError otherwise.
DType dtype_from_name(std::string_view name);
bool dtype_is_floating(DType dtype);

// bfloat16 storage: the upper 16 bits of an IEEE float. Conversion rounds to nearest even.
struct bf16 {
  uint16_t bits = 0;
};

inline float bf16_to_float(bf16 v) {
  uint32_t u = static_cast<uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline bf16 float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return bf16{static_cast<uint16_t>((u >> 16) | 0x40)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>(u >> 16)};
}

// IEEE half storage.
struct f16 {
  uint16_t bits = 0;
};

float f16_to_float(f16 v);
f16 float_to_f16(float f);

// Maps a C++ element type to its DType (used by Tensor::data<T>() checks).
template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::F32; };
template <> struct DTypeOf<bf16> { static constexpr DType value = DType::BF16; };
template <> struct DTypeOf<f16> { static constexpr DType value = DType::F16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::I32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::I64; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::U8; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::Bool; };

}  // namespace veomni
