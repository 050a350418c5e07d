// The FP8 GEMMs of a linear layer: quantize both operands, then one scaled TN GEMM.
#include "model/layers/fp8_linear.h"

#include "kernels/fp8_ops.h"

namespace veomni {
namespace {

struct Quantized {
  Tensor values;  // u8 E4M3 [rows, K]
  Tensor scales;  // f32 [rows]
};

Quantized quantized_rows(const Tensor& x) {
  Quantized q{Tensor::empty(x.shape(), DType::U8, x.device()), Tensor::empty({x.dim(0)}, DType::F32, x.device())};
  ops::quantize_fp8_rows(x, q.values, q.scales);
  return q;
}

Quantized quantized_cols_transposed(const Tensor& x) {
  Quantized q{Tensor::empty({x.dim(1), x.dim(0)}, DType::U8, x.device()),
              Tensor::empty({x.dim(1)}, DType::F32, x.device())};
  ops::quantize_fp8_cols_transposed(x, q.values, q.scales);
  return q;
}

bool multiple_of_16(int64_t v) { return v % 16 == 0; }

}  // namespace

bool fp8_linear_applies(const Tensor& x, const Tensor& w) {
  return x.device().is_cuda() && x.dtype() == DType::BF16 && w.dtype() == DType::BF16 && x.ndim() == 2 &&
         multiple_of_16(x.dim(0)) && multiple_of_16(w.dim(0)) && multiple_of_16(w.dim(1));
}

void fp8_linear_forward(const Tensor& x, const Tensor& w, Tensor& y, float beta) {
  const Quantized qx = quantized_rows(x);
  const Quantized qw = quantized_rows(w);
  ops::matmul_fp8_tn(qx.values, qx.scales, qw.values, qw.scales, y, beta);
}

void fp8_linear_input_grad(const Tensor& dy, const Tensor& w, Tensor& dx, float beta) {
  const Quantized qdy = quantized_rows(dy);
  const Quantized qwt = quantized_cols_transposed(w);
  ops::matmul_fp8_tn(qdy.values, qdy.scales, qwt.values, qwt.scales, dx, beta);
}

}  // namespace veomni
