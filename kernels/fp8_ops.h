// FP8 (E4M3) ops of the rowwise-scaled linear recipe: quantizing rows (or the columns of a matrix, into its
// transpose) with one f32 scale each, and the "TN" GEMM of two such operands with f32 accumulation. The ops'
// signatures and documentation are in kernels/fp8_op_list.h.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace veomni::ops {

// FP8 values are OCP float8_e4m3fn bytes (1 sign, 4 exponent bits of bias 7, 3 mantissa bits; no infinities,
// 0x7F / 0xFF are NaN) stored in U8 tensors. The largest finite magnitude is 448.
inline constexpr float kFp8E4M3Max = 448.0f;

// float -> E4M3: round to nearest even, saturating to +-448 (finite values and infinities alike), subnormals down to
// 2^-9 kept, NaN -> 0x7F; the sign of a zero result is kept. What CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE,
// __NV_E4M3) returns.
uint8_t fp8_e4m3_from_float(float value);
// E4M3 -> float (exact).
float fp8_e4m3_to_float(uint8_t bits);

#define VEOMNI_OP(return_type, name, params) return_type name params;
#define VEOMNI_DEFAULT(value) = value
#include "kernels/fp8_op_list.h"

}  // namespace veomni::ops
