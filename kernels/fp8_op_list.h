// The FP8 ops (kernels/fp8_ops.h), each signature written once with its documentation, in the form of
// kernels/op_list.h (which explains the markers): kernels/fp8_ops.h expands it into the public declarations,
// kernels/cpu/ops_cpu.h and kernels/cuda/ops_cuda.h into the backends'. FP8 values are OCP float8_e4m3fn bytes in U8
// tensors (kernels/fp8_ops.h). Included more than once on purpose: no include guard; every marker is undefined at
// the end.
#ifndef VEOMNI_OP
#error "define VEOMNI_OP(return_type, name, params) before including kernels/fp8_op_list.h"
#endif
#ifndef VEOMNI_DEFAULT
#define VEOMNI_DEFAULT(value)
#endif

// Rowwise quantization: x [M, K] (f32; bf16 too on CUDA) -> q u8 [M, K] and scales f32 [M], with
// scales[m] = amax(|x[m, :]|) / 448 (1 for a row of zeros) and q[m, k] = e4m3(x[m, k] / scales[m]), so that
// x ~= q * scales[m]. Both divisions are IEEE f32 divisions, which makes the CUDA result bit-identical to the CPU's.
VEOMNI_OP(void, quantize_fp8_rows, (const Tensor& x, Tensor& q, Tensor& scales))

// Columnwise quantization into the transpose: x [M, K] -> qt u8 [K, M] and scales f32 [K], qt[k, m] =
// e4m3(x[m, k] / scales[k]) with scales[k] = amax(|x[:, k]|) / 448 (1 for a column of zeros): quantize_fp8_rows of
// x^T. It gives the K-major copy of a weight that the backward's dy W needs.
VEOMNI_OP(void, quantize_fp8_cols_transposed, (const Tensor& x, Tensor& qt, Tensor& scales))

// out [M, N] = a_scales[m] * b_scales[n] * sum_k a[m, k] b[n, k] + beta * out, for a u8 [M, K] and b u8 [N, K]
// (both K-major, the only layout Hopper's FP8 tensor cores take) quantized as above; f32 accumulation. out is f32
// (bf16 too on CUDA). On CUDA M, N and K must be multiples of 16 (cuBLASLt's FP8 alignment, as torch._scaled_mm
// asks).
VEOMNI_OP(void, matmul_fp8_tn,
          (const Tensor& a, const Tensor& a_scales, const Tensor& b, const Tensor& b_scales, Tensor& out,
           float beta VEOMNI_DEFAULT(0.0f)))

#undef VEOMNI_OP
#undef VEOMNI_DEFAULT
