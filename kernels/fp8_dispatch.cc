// The op API's front door for the FP8 ops (kernels/fp8_ops.h): checks each call, then runs the backend of the
// tensors' device (kernels/cpu/fp8.cc, kernels/cuda/fp8_quantize.cu and fp8_gemm.cu).
#include "kernels/cpu/ops_cpu.h"
#include "kernels/fp8_ops.h"
#include "kernels/op_call.h"
#include "kernels/op_profiler.h"

#if defined(VEOMNI_WITH_CUDA) && __has_include("kernels/cuda/ops_cuda.h")
#include "kernels/cuda/ops_cuda.h"
#define VEOMNI_FP8_BACKEND(op, device, ...) ((device).is_cuda() ? cuda::op(__VA_ARGS__) : cpu::op(__VA_ARGS__))
#else
#define VEOMNI_FP8_BACKEND(op, device, ...) \
  ((device).is_cuda() ? no_cuda_kernels(#op, device) : cpu::op(__VA_ARGS__))
#endif
// The backend call, timed by the op profiler (VEOMNI_PROFILE_OPS) under `key_expr`, like the other ops.
#define VEOMNI_FP8_ROUTE(key_expr, op, device, ...)                                                  \
  ::veomni::op_profile_timed(device, [&]() -> OpKey { return key_expr; },                          \
                             [&]() -> decltype(auto) { return VEOMNI_FP8_BACKEND(op, device, __VA_ARGS__); })

namespace veomni::ops {
namespace {

// The checks of one FP8 call.
class Fp8Call : public OpCall {
 public:
  using OpCall::OpCall;

  // Defined, on the call's device, of `dtype` and exactly `shape`.
  void tensor(const Tensor& t, const char* name, DType dtype, const Shape& shape) const {
    require(t.defined(), "{} is undefined", name);
    on_device(t, name);
    require(t.dtype() == dtype && t.shape() == shape, "{} is {}, expected {}{}", name, t.describe(),
            dtype_name(dtype), shape_str(shape));
  }
};

}  // namespace

void quantize_fp8_rows(const Tensor& x, Tensor& q, Tensor& scales) {
  const Fp8Call c("quantize_fp8_rows", x);
  c.rank(x, "x", 2);
  c.float_dtype(x, "x");
  c.tensor(q, "q", DType::U8, x.shape());
  c.tensor(scales, "scales", DType::F32, {x.dim(0)});
  VEOMNI_FP8_ROUTE((OpKey{.op = "quantize_fp8_rows", .dims = {x.dim(0), x.dim(1), 0, 0}, .ndims = 2}),
                   quantize_fp8_rows, c.device(), x, q, scales);
}

void quantize_fp8_cols_transposed(const Tensor& x, Tensor& qt, Tensor& scales) {
  const Fp8Call c("quantize_fp8_cols_transposed", x);
  c.rank(x, "x", 2);
  c.float_dtype(x, "x");
  c.tensor(qt, "qt", DType::U8, {x.dim(1), x.dim(0)});
  c.tensor(scales, "scales", DType::F32, {x.dim(1)});
  VEOMNI_FP8_ROUTE((OpKey{.op = "quantize_fp8_cols_transposed", .dims = {x.dim(0), x.dim(1), 0, 0}, .ndims = 2}),
                   quantize_fp8_cols_transposed, c.device(), x, qt, scales);
}

void matmul_fp8_tn(const Tensor& a, const Tensor& a_scales, const Tensor& b, const Tensor& b_scales, Tensor& out,
                   float beta) {
  const Fp8Call c("matmul_fp8_tn", a);
  c.rank(a, "a", 2);
  c.rank(b, "b", 2);
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(0);
  c.tensor(a, "a", DType::U8, {m, k});
  c.tensor(b, "b", DType::U8, {n, k});
  c.tensor(a_scales, "a_scales", DType::F32, {m});
  c.tensor(b_scales, "b_scales", DType::F32, {n});
  c.rank(out, "out", 2);
  c.float_dtype(out, "out");
  c.require(out.shape() == Shape{m, n}, "out is {}, expected shape {}", out.describe(), shape_str({m, n}));
  if (c.device().is_cuda())
    c.require(m % 16 == 0 && n % 16 == 0 && k % 16 == 0,
              "m={} n={} k={}: cuBLASLt's FP8 GEMMs need multiples of 16", m, n, k);
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  VEOMNI_FP8_ROUTE((OpKey{.op = "matmul_fp8 TN", .dims = {m, n, k, 0}, .ndims = 3, .flops = flops}), matmul_fp8_tn,
                   c.device(), a, a_scales, b, b_scales, out, beta);
}

}  // namespace veomni::ops
