// CPU GEMM: packed, cache-blocked, parallel over output tiles; backs matmul and the grouped expert GEMMs (declared
// with the other ops in kernels/cpu/ops_cpu.h).
#pragma once
#include <cstdint>
#include <vector>


namespace veomni::ops::cpu {

// c = alpha * op(a) @ op(b) + beta * c with op(a) [m, k] and op(b) [k, n]; row-major with leading dimensions.
// beta == 0 overwrites c (whatever it held, NaN included), as BLAS does.
struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  int64_t lda = 0;
  bool trans_a = false;
  const float* b = nullptr;
  int64_t ldb = 0;
  bool trans_b = false;
  float* c = nullptr;
  int64_t ldc = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
};

// The instruction sets the micro-kernel is built for. All give the same bits (no fused multiply-adds); the widest one
// the CPU has is used.
enum class GemmIsa { baseline, avx2, avx512 };
bool gemm_isa_available(GemmIsa isa);
const char* gemm_isa_name(GemmIsa isa);

// Runs every problem, spreading their output tiles over the threads. Each element of c is computed by one thread,
// summing over k in a fixed blocked order, so results do not depend on the thread count (nor on the instruction set).
void gemm(const std::vector<GemmProblem>& problems);
// The same on a chosen instruction set (which must be available): for tests.
void gemm(const std::vector<GemmProblem>& problems, GemmIsa isa);

}  // namespace veomni::ops::cpu
