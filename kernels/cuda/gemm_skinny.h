// The GEMMs of decoding with few rows (out = x W^T, x [M, K] with M <= kSkinnyMaxRows, bf16): warps streaming W once
// in 16-byte loads against x staged in shared memory, where cuBLASLt's kernels reach a fraction of the bandwidth.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace veomni::ops::cuda {

// Past 4 rows cuBLASLt's tensor-core kernels win: this kernel's FMAs per weight chunk grow with the rows while the
// weight stream does not (Qwen3-0.6B shape on one H200, decode tokens/s with this kernel's 8-row instance against
// cuBLASLt: 1,668 / 1,308 at batch 2, 2,480 / 2,599 at 4, 3,671 / 4,972 at 8; bench/RESULTS.md).
inline constexpr int64_t kSkinnyMaxRows = 4;
// Several rows take the kernel only while the rows times the weight's bytes are at most this. Over a small weight,
// read in a few microseconds, the kernel's single launch (the norm inside it) beats cuBLASLt's and a separate norm's;
// over a large one the rows' FMAs, which grow with the rows, hold the kernel under cuBLASLt's bandwidth (one H200,
// bench_kernels_cuda decode, ms kernel / cuBLASLt: the 0.6B LM head, 311 MB, at 4 rows 0.133 / 0.096; the 8B q/k/v,
// 48 MiB, 0.025 / 0.030 at 2 rows and 0.033 / 0.031 at 4; the 8B o_proj, 32 MiB, 0.021 / 0.017 at 4 rows).
inline constexpr int64_t kSkinnySeveralRowsMostBytes = int64_t{96} << 20;

// Whether matmul(a, trans_a, b, trans_b, out, alpha, beta) is one the skinny kernel computes: a [M, K] (no
// transpose), b [N, K] (transposed), all bf16, M <= kSkinnyMaxRows, K a multiple of 8, alpha 1, beta 0 or 1, 16-byte
// aligned operands, one row or rows times weight bytes of at most kSkinnySeveralRowsMostBytes; and
// VEOMNI_SKINNY_GEMM is not 0 (the switch for comparing against cuBLASLt). With a gain (an RMSNorm of a's rows in
// front), the gain must be bf16 [K] and 16-byte aligned too.
bool skinny_matmul_applies(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& out,
                           float alpha, float beta, const Tensor* gain = nullptr);
// out [M, N] = a [M, K] b[N, K]^T (+ out when accumulate), fp32 accumulation, bf16 output rounded to nearest even
// once. With a gain, a's rows are first normalised as rmsnorm_forward(a, *gain, eps) would, with its bits.
void skinny_matmul(const Tensor& a, const Tensor& b, Tensor& out, bool accumulate, const Tensor* gain = nullptr,
                   float eps = 0.0f);

// Whether matmul_swiglu(x, gate_up, out) takes the one-kernel path: the skinny GEMM's conditions on x and gate_up
// [2I, K] (and the gain), out [M, I] bf16 and 16-byte aligned.
bool skinny_swiglu_applies(const Tensor& x, const Tensor& gate_up, const Tensor& out, const Tensor* gain = nullptr);
// out [M, I] = SwiGLU of x gate_up^T: the same bits as skinny_matmul into [M, 2I] followed by swiglu_fused_forward.
// With a gain, x's rows are normalised first, as in skinny_matmul.
void skinny_swiglu(const Tensor& x, const Tensor& gate_up, Tensor& out, const Tensor* gain = nullptr,
                   float eps = 0.0f);

}  // namespace veomni::ops::cuda
