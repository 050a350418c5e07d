// FP8 (E4M3) ops of the rowwise-scaled linear recipe: quantizing rows (or the columns of a matrix, into its
// transpose) with one f32 scale each, and the "TN" GEMM of two such operands with f32 accumulation.
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

// Rowwise quantization: x [M, K] (f32; bf16 too on CUDA) -> q u8 [M, K] and scales f32 [M], with
// scales[m] = amax(|x[m, :]|) / 448 (1 for a row of zeros) and q[m, k] = e4m3(x[m, k] / scales[m]), so that
// x ~= q * scales[m]. Both divisions are IEEE f32 divisions, which makes the CUDA result bit-identical to the CPU's.
void quantize_fp8_rows(const Tensor& x, Tensor& q, Tensor& scales);

// Columnwise quantization into the transpose: x [M, K] -> qt u8 [K, M] and scales f32 [K], qt[k, m] =
// e4m3(x[m, k] / scales[k]) with scales[k] = amax(|x[:, k]|) / 448 (1 for a column of zeros): quantize_fp8_rows of
// x^T. It gives the K-major copy of a weight that the backward's dy W needs.
void quantize_fp8_cols_transposed(const Tensor& x, Tensor& qt, Tensor& scales);

// out [M, N] = a_scales[m] * b_scales[n] * sum_k a[m, k] b[n, k] + beta * out, for a u8 [M, K] and b u8 [N, K]
// (both K-major, the only layout Hopper's FP8 tensor cores take) quantized as above; f32 accumulation. out is f32
// (bf16 too on CUDA). On CUDA M, N and K must be multiples of 16 (cuBLASLt's FP8 alignment, as torch._scaled_mm
// asks).
void matmul_fp8_tn(const Tensor& a, const Tensor& a_scales, const Tensor& b, const Tensor& b_scales, Tensor& out,
                   float beta = 0.0f);

}  // namespace veomni::ops
