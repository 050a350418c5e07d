// CPU SwiGLU: out = silu(gate) * up. silu is taken in double and rounded once, then multiplied by up in fp32, the
// rounding steps of torch's act_fn(gate) * up.
#include "kernels/cpu/ops_cpu.h"

#include <cmath>

#include "kernels/cpu/parallel.h"

namespace veomni::ops::cpu {
namespace {

constexpr int64_t kWorkPerElement = 30;  // one exp and a few flops

double sigmoid(double g) { return 1.0 / (1.0 + std::exp(-g)); }

float silu(float g) { return static_cast<float>(static_cast<double>(g) * sigmoid(g)); }

void forward_row(int64_t n, const float* __restrict gate, const float* __restrict up, float* __restrict out) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

// d silu(g)/dg = s * (1 + g * (1 - s)), s = sigmoid(g).
void backward_row(int64_t n, const float* __restrict dout, const float* __restrict gate, const float* __restrict up,
                  float* __restrict dgate, float* __restrict dup) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double s = sigmoid(g);
    const double d = dout[i];
    dgate[i] = static_cast<float>(d * static_cast<double>(up[i]) * s * (1.0 + g * (1.0 - s)));
    dup[i] = static_cast<float>(d * g * s);
  }
}

}  // namespace

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out) {
  const int64_t rows = gate.dim(0);
  const int64_t cols = gate.dim(1);
  const float* g = gate.data<float>();
  const float* u = up.data<float>();
  float* o = out.data<float>();
  parallel_for(rows, kWorkPerElement * cols,
               [&](int64_t r) { forward_row(cols, g + r * cols, u + r * cols, o + r * cols); });
}

void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup) {
  const int64_t rows = gate.dim(0);
  const int64_t cols = gate.dim(1);
  const float* d = dout.data<float>();
  const float* g = gate.data<float>();
  const float* u = up.data<float>();
  float* dg = dgate.data<float>();
  float* du = dup.data<float>();
  parallel_for(rows, kWorkPerElement * cols, [&](int64_t r) {
    const int64_t o = r * cols;
    backward_row(cols, d + o, g + o, u + o, dg + o, du + o);
  });
}

void swiglu_fused_forward(const Tensor& gate_up, Tensor& out) {
  const int64_t rows = out.dim(0);
  const int64_t cols = out.dim(1);
  const float* gu = gate_up.data<float>();
  float* o = out.data<float>();
  parallel_for(rows, kWorkPerElement * cols, [&](int64_t r) {
    const float* row = gu + r * 2 * cols;
    forward_row(cols, row, row + cols, o + r * cols);
  });
}

void swiglu_fused_backward(const Tensor& dout, const Tensor& gate_up, Tensor& dgate_up) {
  const int64_t rows = dout.dim(0);
  const int64_t cols = dout.dim(1);
  const float* d = dout.data<float>();
  const float* gu = gate_up.data<float>();
  float* dgu = dgate_up.data<float>();
  parallel_for(rows, kWorkPerElement * cols, [&](int64_t r) {
    const float* row = gu + r * 2 * cols;
    float* drow = dgu + r * 2 * cols;
    backward_row(cols, d + r * cols, row, row + cols, drow, drow + cols);
  });
}

}  // namespace veomni::ops::cpu
