// CPU FP8 ops: the E4M3 conversions done by hand (round to nearest even, saturation, subnormals), rowwise and
// columnwise quantization, and the scaled TN GEMM over the dequantized operands in f32.
#include "kernels/cpu/ops_cpu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/fp8_ops.h"

namespace veomni::ops {

uint8_t fp8_e4m3_from_float(float value) {
  if (std::isnan(value)) return 0x7F;
  const uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  const float magnitude = std::fabs(value);
  if (magnitude >= kFp8E4M3Max) return sign | 0x7E;  // satfinite: 448 and above (infinity too) saturate
  // Below the smallest normal (2^-6) the step is 2^-9; a subnormal's code is its count of steps, and 8 steps are
  // the smallest normal's code 0x08, so rounding up into it needs no special case. magnitude * 512 is exact.
  if (magnitude < 0x1p-6f) return sign | static_cast<uint8_t>(std::nearbyint(magnitude * 512.0f));
  int exponent = 0;
  (void)std::frexp(magnitude, &exponent);  // magnitude = f * 2^exponent, f in [0.5, 1)
  const int unbiased = exponent - 1;       // magnitude in [2^unbiased, 2^(unbiased + 1))
  // Steps of 2^(unbiased - 3): 8..16 of them; 16 carries into the next exponent, as the code arithmetic does too.
  const int steps = static_cast<int>(std::nearbyint(std::ldexp(magnitude, 3 - unbiased)));
  const int code = ((unbiased + 7) << 3) + (steps - 8);
  return sign | static_cast<uint8_t>(std::min(code, 0x7E));
}

float fp8_e4m3_to_float(uint8_t bits) {
  const int exponent = (bits >> 3) & 0xF, mantissa = bits & 0x7;
  const float sign = (bits & 0x80) ? -1.0f : 1.0f;
  if (exponent == 0xF && mantissa == 0x7) return std::nanf("");
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);
  return sign * std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
}

namespace cpu {
namespace {

// The scale of values whose largest magnitude is amax: amax / 448, or 1 when they are all zero.
float scale_for(float amax) { return amax > 0.0f ? amax / kFp8E4M3Max : 1.0f; }

}  // namespace

void quantize_fp8_rows(const Tensor& x, Tensor& q, Tensor& scales) {
  const int64_t rows = x.dim(0), cols = x.dim(1);
  const float* in = x.data<float>();
  uint8_t* out = q.data<uint8_t>();
  float* s = scales.data<float>();
  parallel_for(rows, cols, [&](int64_t r) {
    const float* row = in + r * cols;
    float amax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) amax = std::fmax(amax, std::fabs(row[c]));
    const float scale = scale_for(amax);
    s[r] = scale;
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = fp8_e4m3_from_float(row[c] / scale);
  });
}

void quantize_fp8_cols_transposed(const Tensor& x, Tensor& qt, Tensor& scales) {
  const int64_t rows = x.dim(0), cols = x.dim(1);
  const float* in = x.data<float>();
  uint8_t* out = qt.data<uint8_t>();
  float* s = scales.data<float>();
  parallel_for(cols, rows, [&](int64_t c) {
    float amax = 0.0f;
    for (int64_t r = 0; r < rows; ++r) amax = std::fmax(amax, std::fabs(in[r * cols + c]));
    const float scale = scale_for(amax);
    s[c] = scale;
    for (int64_t r = 0; r < rows; ++r) out[c * rows + r] = fp8_e4m3_from_float(in[r * cols + c] / scale);
  });
}

void matmul_fp8_tn(const Tensor& a, const Tensor& a_scales, const Tensor& b, const Tensor& b_scales, Tensor& out,
                   float beta) {
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(0);
  const uint8_t* qa = a.data<uint8_t>();
  const uint8_t* qb = b.data<uint8_t>();
  const float* sa = a_scales.data<float>();
  const float* sb = b_scales.data<float>();
  float* y = out.data<float>();
  // Every E4M3 value is exact in f32: decode b once, then each output is an f32 dot product of exact values.
  std::vector<float> b_values(static_cast<size_t>(n * k));
  for (size_t i = 0; i < b_values.size(); ++i) b_values[i] = fp8_e4m3_to_float(qb[i]);
  parallel_for(m, n * k, [&](int64_t i) {
    std::vector<float> a_row(static_cast<size_t>(k));
    for (int64_t p = 0; p < k; ++p) a_row[static_cast<size_t>(p)] = fp8_e4m3_to_float(qa[i * k + p]);
    for (int64_t j = 0; j < n; ++j) {
      const float* b_row = b_values.data() + j * k;
      float sum = 0.0f;
      for (int64_t p = 0; p < k; ++p) sum += a_row[static_cast<size_t>(p)] * b_row[p];
      const float product = sa[i] * sb[j] * sum;
      float& dst = y[i * n + j];
      dst = beta == 0.0f ? product : product + beta * dst;
    }
  });
}

}  // namespace cpu
}  // namespace veomni::ops
