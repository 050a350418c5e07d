// CPU RoPE. The tables follow HF's fp32 arithmetic step by step (inv_freq, then the fp32 product position *
// inv_freq) because at large positions the rounding of that product moves the angle by more than 1e-5; only the
// final cos/sin are taken in double and rounded once.
#include "kernels/cpu/ops_cpu.h"

#include <cmath>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_loops.h"

namespace veomni::ops::cpu {
namespace {

// HF: 1 / (theta ** (arange(0, D, 2).float() / D)), every step in fp32.
std::vector<float> inverse_frequencies(int64_t head_dim, double theta) {
  const int64_t half = head_dim / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  const float base = static_cast<float>(theta);
  for (int64_t j = 0; j < half; ++j) {
    const float exponent = static_cast<float>(2 * j) / static_cast<float>(head_dim);
    const float power = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
    inv[static_cast<size_t>(j)] = 1.0f / power;
  }
  return inv;
}

// Positions as fp32, [streams * S], the way HF feeds them to the product.
std::vector<float> positions_as_float(const Tensor& positions) {
  std::vector<float> out(static_cast<size_t>(positions.numel()));
  if (positions.dtype() == DType::F32) {
    const float* p = positions.data<float>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = p[i];
  } else {
    const int64_t* p = positions.data<int64_t>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(p[i]);
  }
  return out;
}

// Interleaved M-RoPE: frequency j reads stream H if j%3==1 && j < 3*section[1], W if j%3==2 && j < 3*section[2],
// else T. Plain 1-D RoPE reads stream 0 everywhere.
int64_t stream_of(int64_t j, const std::vector<int64_t>& section, bool multi_stream) {
  if (!multi_stream) return 0;
  if (j % 3 == 1 && j < 3 * section[1]) return 1;
  if (j % 3 == 2 && j < 3 * section[2]) return 2;
  return 0;
}

// y = x*cos + rotate_half(x)*sin, rotate_half(x) = cat(-x2, x1); in HF's order of fp32 operations.
void rotate_row(int64_t half, const float* __restrict c, const float* __restrict s, float* __restrict x) {
  float* __restrict x2 = x + half;
  for_each_lane(half, [&](int64_t i) {
    const float a = x[i];
    const float b = x2[i];
    x[i] = a * c[i] + (-b) * s[i];
    x2[i] = b * c[i + half] + a * s[i + half];
  });
}

// The transpose of rotate_row: dx = dy*cos + rotate_half^T(dy*sin), rotate_half^T(u) = cat(u2, -u1).
void rotate_row_transposed(int64_t half, const float* __restrict c, const float* __restrict s, float* __restrict x) {
  float* __restrict x2 = x + half;
  for_each_lane(half, [&](int64_t i) {
    const float a = x[i];
    const float b = x2[i];
    x[i] = a * c[i] + b * s[i + half];
    x2[i] = b * c[i + half] - a * s[i];
  });
}

}  // namespace

void rope_tables(const Tensor& positions, int64_t head_dim, double theta, const std::vector<int64_t>& mrope_section,
                 Tensor& cos, Tensor& sin) {
  const int64_t seq_len = positions.dim(-1);
  const int64_t half = head_dim / 2;
  const bool multi_stream = positions.ndim() == 2;
  const std::vector<float> inv_freq = inverse_frequencies(head_dim, theta);
  const std::vector<float> pos = positions_as_float(positions);
  float* cp = cos.data<float>();
  float* sp = sin.data<float>();
  parallel_for(seq_len, 40 * head_dim, [&](int64_t s) {
    float* crow = cp + s * head_dim;
    float* srow = sp + s * head_dim;
    for (int64_t j = 0; j < half; ++j) {
      const float p = pos[static_cast<size_t>(stream_of(j, mrope_section, multi_stream) * seq_len + s)];
      const double angle = static_cast<double>(p * inv_freq[static_cast<size_t>(j)]);
      crow[j] = crow[j + half] = static_cast<float>(std::cos(angle));
      srow[j] = srow[j + half] = static_cast<float>(std::sin(angle));
    }
  });
}

void rope_apply(Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse) {
  const int64_t seq_len = x.dim(0);
  const int64_t heads = x.dim(1);
  const int64_t head_dim = x.dim(2);
  const int64_t half = head_dim / 2;
  float* xp = x.data<float>();
  const float* cp = cos.data<float>();
  const float* sp = sin.data<float>();
  parallel_for(seq_len, 6 * heads * head_dim, [&](int64_t s) {
    const float* c = cp + s * head_dim;
    const float* sn = sp + s * head_dim;
    for (int64_t h = 0; h < heads; ++h) {
      float* row = xp + (s * heads + h) * head_dim;
      if (inverse)
        rotate_row_transposed(half, c, sn, row);
      else
        rotate_row(half, c, sn, row);
    }
  });
}

}  // namespace veomni::ops::cpu
