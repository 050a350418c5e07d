// CPU GEMM in the classic Goto/BLIS shape: pack an MC x KC block of A and a KC x NC block of B into panels, run an
// MR x NR register-blocked micro-kernel over them, and add each KC slice into C in ascending order.
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/ops_cpu.h"

#include <algorithm>

#include "kernels/cpu/parallel.h"

namespace veomni::ops::cpu {
namespace {

// The micro-kernel's accumulator tile: 12 x 16 (twelve 16-float registers under AVX-512) measured fastest of 8x8,
// 6x16, 8x16, 12x16 and 4x32 on an AMD EPYC with AVX-512, for each instruction set below. The tile shape and the
// blocks do not change any element's summation order.
constexpr int64_t kMR = 12;
constexpr int64_t kNR = 16;
// Cache blocks: the packed B block (KC x NC, 256 KiB) stays in L2, an A panel (KC x MR) in L1. kKC fixes the order in
// which the slices of k are added into C: changing it changes the results' rounding.
constexpr int64_t kMC = 96;
constexpr int64_t kNC = 256;
constexpr int64_t kKC = 256;

struct Tile {
  size_t problem;
  int64_t m0, n0;
};

// Copies rows [m0, m0+mc) x depth [p0, p0+kc) of op(a) into panels of kMR rows, each stored depth-major
// ([kc][kMR]); rows past mc are zero so the micro-kernel never branches.
void pack_a(const GemmProblem& g, int64_t m0, int64_t mc, int64_t p0, int64_t kc, float* dst) {
  for (int64_t r = 0; r < mc; r += kMR) {
    const int64_t rows = std::min(kMR, mc - r);
    float* panel = dst + r * kc;
    if (rows < kMR) std::fill(panel, panel + kc * kMR, 0.0f);
    if (!g.trans_a) {
      for (int64_t i = 0; i < rows; ++i) {
        const float* src = g.a + (m0 + r + i) * g.lda + p0;
        for (int64_t p = 0; p < kc; ++p) panel[p * kMR + i] = src[p];
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = g.a + (p0 + p) * g.lda + m0 + r;
        for (int64_t i = 0; i < rows; ++i) panel[p * kMR + i] = src[i];
      }
    }
  }
}

// Copies depth [p0, p0+kc) x columns [n0, n0+nc) of op(b) into panels of kNR columns ([kc][kNR]), zero-padded.
void pack_b(const GemmProblem& g, int64_t n0, int64_t nc, int64_t p0, int64_t kc, float* dst) {
  for (int64_t c = 0; c < nc; c += kNR) {
    const int64_t cols = std::min(kNR, nc - c);
    float* panel = dst + c * kc;
    if (cols < kNR) std::fill(panel, panel + kc * kNR, 0.0f);
    if (!g.trans_b) {
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = g.b + (p0 + p) * g.ldb + n0 + c;
        for (int64_t j = 0; j < cols; ++j) panel[p * kNR + j] = src[j];
      }
    } else {
      for (int64_t j = 0; j < cols; ++j) {
        const float* src = g.b + (n0 + c + j) * g.ldb + p0;
        for (int64_t p = 0; p < kc; ++p) panel[p * kNR + j] = src[p];
      }
    }
  }
}

// acc = A panel @ B panel over kc; fixed trip counts let the compiler keep the tile in registers and vectorise over
// j. Each element is a chain of separate multiplies and adds in p order (this file is built with -ffp-contract=off),
// so every instruction set below gives the same bits.
[[gnu::always_inline]] inline void micro_kernel_body(int64_t kc, const float* __restrict a, const float* __restrict b,
                                                     float* __restrict out) {
  float acc[kMR][kNR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float* ap = a + p * kMR;
    const float* bp = b + p * kNR;
    for (int64_t i = 0; i < kMR; ++i)
      for (int64_t j = 0; j < kNR; ++j) acc[i][j] += ap[i] * bp[j];
  }
  for (int64_t i = 0; i < kMR; ++i)
    for (int64_t j = 0; j < kNR; ++j) out[i * kNR + j] = acc[i][j];
}

using MicroKernel = void (*)(int64_t, const float*, const float*, float*);

void micro_kernel_baseline(int64_t kc, const float* a, const float* b, float* out) { micro_kernel_body(kc, a, b, out); }

#if defined(__x86_64__)
// The library is built for baseline x86-64 (SSE2); wider registers are used where the CPU has them.
[[gnu::target("avx2")]] void micro_kernel_avx2(int64_t kc, const float* a, const float* b, float* out) {
  micro_kernel_body(kc, a, b, out);
}
[[gnu::target("avx512f")]] void micro_kernel_avx512(int64_t kc, const float* a, const float* b, float* out) {
  micro_kernel_body(kc, a, b, out);
}
#endif

MicroKernel micro_kernel_for(GemmIsa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case GemmIsa::avx512: return micro_kernel_avx512;
    case GemmIsa::avx2: return micro_kernel_avx2;
#endif
    default: return micro_kernel_baseline;
  }
}

GemmIsa widest_available_isa() {
  for (const GemmIsa isa : {GemmIsa::avx512, GemmIsa::avx2})
    if (gemm_isa_available(isa)) return isa;
  return GemmIsa::baseline;
}

// Adds one KC slice into C: the first slice also applies beta (beta == 0 overwrites), later ones accumulate.
void store_tile(const GemmProblem& g, int64_t i0, int64_t j0, int64_t rows, int64_t cols, const float* acc,
                bool first_slice) {
  for (int64_t i = 0; i < rows; ++i) {
    float* c = g.c + (i0 + i) * g.ldc + j0;
    const float* t = acc + i * kNR;
    if (!first_slice) {
      for (int64_t j = 0; j < cols; ++j) c[j] += g.alpha * t[j];
    } else if (g.beta == 0.0f) {
      for (int64_t j = 0; j < cols; ++j) c[j] = g.alpha * t[j];
    } else {
      for (int64_t j = 0; j < cols; ++j) c[j] = g.beta * c[j] + g.alpha * t[j];
    }
  }
}

// C tile = beta * C tile, for k == 0 (nothing to multiply).
void scale_tile(const GemmProblem& g, int64_t m0, int64_t mc, int64_t n0, int64_t nc) {
  for (int64_t i = 0; i < mc; ++i) {
    float* c = g.c + (m0 + i) * g.ldc + n0;
    for (int64_t j = 0; j < nc; ++j) c[j] = g.beta == 0.0f ? 0.0f : g.beta * c[j];
  }
}

void run_tile(const GemmProblem& g, int64_t m0, int64_t n0, MicroKernel micro_kernel) {
  const int64_t mc = std::min(kMC, g.m - m0);
  const int64_t nc = std::min(kNC, g.n - n0);
  if (g.k == 0) return scale_tile(g, m0, mc, n0, nc);
  // One set of packing buffers per thread, reused across tiles and calls.
  thread_local std::vector<float> a_pack(kMC * kKC);
  thread_local std::vector<float> b_pack(kNC * kKC);
  alignas(64) float acc[kMR * kNR];
  for (int64_t p0 = 0; p0 < g.k; p0 += kKC) {
    const int64_t kc = std::min(kKC, g.k - p0);
    pack_a(g, m0, mc, p0, kc, a_pack.data());
    pack_b(g, n0, nc, p0, kc, b_pack.data());
    for (int64_t jr = 0; jr < nc; jr += kNR) {
      for (int64_t ir = 0; ir < mc; ir += kMR) {
        micro_kernel(kc, a_pack.data() + ir * kc, b_pack.data() + jr * kc, acc);
        store_tile(g, m0 + ir, n0 + jr, std::min(kMR, mc - ir), std::min(kNR, nc - jr), acc, p0 == 0);
      }
    }
  }
}

}  // namespace

bool gemm_isa_available(GemmIsa isa) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  switch (isa) {
    case GemmIsa::baseline: return true;
    case GemmIsa::avx2: return __builtin_cpu_supports("avx2");
    case GemmIsa::avx512: return __builtin_cpu_supports("avx512f");
  }
  return false;
#else
  return isa == GemmIsa::baseline;
#endif
}

const char* gemm_isa_name(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::baseline: return "baseline";
    case GemmIsa::avx2: return "avx2";
    case GemmIsa::avx512: return "avx512";
  }
  return "?";
}

void gemm(const std::vector<GemmProblem>& problems) {
  static const GemmIsa widest = widest_available_isa();
  gemm(problems, widest);
}

void gemm(const std::vector<GemmProblem>& problems, GemmIsa isa) {
  VEOMNI_CHECK(gemm_isa_available(isa), "the CPU GEMM's {} kernel needs an instruction set this CPU lacks",
               gemm_isa_name(isa));
  const MicroKernel micro_kernel = micro_kernel_for(isa);
  std::vector<Tile> tiles;
  int64_t flops = 0;
  for (size_t p = 0; p < problems.size(); ++p) {
    const GemmProblem& g = problems[p];
    for (int64_t m0 = 0; m0 < g.m; m0 += kMC)
      for (int64_t n0 = 0; n0 < g.n; n0 += kNC) tiles.push_back({p, m0, n0});
    flops += 2 * g.m * g.n * std::max<int64_t>(g.k, 1);
  }
  const int64_t n_tiles = static_cast<int64_t>(tiles.size());
  if (n_tiles == 0) return;
  parallel_for_dynamic(n_tiles, flops / n_tiles, [&](int64_t t) {
    const Tile& tile = tiles[static_cast<size_t>(t)];
    run_tile(problems[tile.problem], tile.m0, tile.n0, micro_kernel);
  });
}

void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& out, float alpha, float beta,
            const Tensor& addend) {
  // The reference reads the addend through out: copied in first, then the GEMM adds onto it.
  if (addend.defined()) out.copy_from(addend);
  GemmProblem g;
  g.m = out.dim(0);
  g.n = out.dim(1);
  g.k = trans_a ? a.dim(0) : a.dim(1);
  g.a = a.data<float>();
  g.lda = a.dim(1);
  g.trans_a = trans_a;
  g.b = b.data<float>();
  g.ldb = b.dim(1);
  g.trans_b = trans_b;
  g.c = out.data<float>();
  g.ldc = g.n;
  g.alpha = alpha;
  g.beta = beta;
  gemm({g});
}

void grouped_matmul(const Tensor& x, const Tensor& w, bool trans_w, const std::vector<int64_t>& group_sizes,
                    Tensor& out) {
  const int64_t k = x.dim(1);
  const int64_t n = out.dim(1);
  std::vector<GemmProblem> problems;
  int64_t row = 0;
  for (size_t e = 0; e < group_sizes.size(); ++e) {
    GemmProblem g;
    g.m = group_sizes[e];
    g.n = n;
    g.k = k;
    g.a = x.data<float>() + row * k;
    g.lda = k;
    g.b = w.data<float>() + static_cast<int64_t>(e) * n * k;
    g.ldb = trans_w ? k : n;
    g.trans_b = trans_w;
    g.c = out.data<float>() + row * n;
    g.ldc = n;
    if (g.m > 0) problems.push_back(g);
    row += group_sizes[e];
  }
  gemm(problems);
}

void grouped_matmul_weight_grad(const Tensor& dy, const Tensor& x, const std::vector<int64_t>& group_sizes, Tensor& dw,
                                bool accumulate) {
  const int64_t n = dy.dim(1);
  const int64_t k = x.dim(1);
  std::vector<GemmProblem> problems;
  int64_t row = 0;
  for (size_t e = 0; e < group_sizes.size(); ++e) {
    // dw[e] = dy_e^T x_e: an expert that got no rows still has its gradient zeroed (k == 0 case) unless accumulating.
    GemmProblem g;
    g.m = n;
    g.n = k;
    g.k = group_sizes[e];
    g.a = dy.data<float>() + row * n;
    g.lda = n;
    g.trans_a = true;
    g.b = x.data<float>() + row * k;
    g.ldb = k;
    g.c = dw.data<float>() + static_cast<int64_t>(e) * n * k;
    g.ldc = k;
    g.beta = accumulate ? 1.0f : 0.0f;
    problems.push_back(g);
    row += group_sizes[e];
  }
  gemm(problems);
}

}  // namespace veomni::ops::cpu
