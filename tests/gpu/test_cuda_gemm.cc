// GPU tests of the cuBLASLt GEMMs against the CPU GEMM: every transpose, f32/bf16 inputs and outputs (mixed too),
// alpha/beta, empty dimensions, the skinny decoding GEMM (a few rows, bf16; its residual add and its SwiGLU
// epilogue; launched early under OverlappedLaunches), and the grouped expert GEMMs with empty
// groups. Inputs are bf16-representable on both
// sides, so only a bf16 output is held to the bf16 tolerance.
#include "gpu_test_util.h"
#include "kernels/cuda/gemm_skinny.h"
#include "kernels/decode_ops.h"
#include "kernels/ops.h"
#include "kernels/overlapped_launches.h"
#include "kernels/step_graph.h"

using namespace veomni;
using namespace veomni::gpu_test;

namespace {

class CudaGemm : public CudaTest {};

struct Types {
  DType a, b, out;
};

const Types kTypeMixes[] = {{DType::F32, DType::F32, DType::F32},
                            {DType::BF16, DType::BF16, DType::F32},
                            {DType::BF16, DType::BF16, DType::BF16},
                            {DType::F32, DType::F32, DType::BF16},
                            {DType::BF16, DType::F32, DType::F32}};

std::string describe_types(const Types& t) {
  return fmt::format("a {} b {} out {}", dtype_name(t.a), dtype_name(t.b), dtype_name(t.out));
}

// Checks one matmul of op(a) [m, k] @ op(b) [k, n] on the GPU against the CPU.
void check_matmul(int64_t m, int64_t n, int64_t k, bool ta, bool tb, const Types& types, float alpha, float beta,
                  std::mt19937& rng) {
  SCOPED_TRACE(fmt::format("m {} n {} k {} trans {}/{} {} alpha {} beta {}", m, n, k, ta, tb, describe_types(types),
                           alpha, beta));
  const Tensor a = representable(random_f32(ta ? Shape{k, m} : Shape{m, k}, rng), types.a);
  const Tensor b = representable(random_f32(tb ? Shape{n, k} : Shape{k, n}, rng), types.b);
  const Tensor out0 = representable(random_f32({m, n}, rng), types.out);
  Tensor want = out0.clone();
  ops::matmul(a, ta, b, tb, want, alpha, beta);
  Tensor got = to_gpu(out0, types.out);
  ops::matmul(to_gpu(a, types.a), ta, to_gpu(b, types.b), tb, got, alpha, beta);
  EXPECT_EQ(got.dtype(), types.out);
  EXPECT_TRUE(close_to(got, want, rtol_for(types.out)));
}

TEST_F(CudaGemm, MatmulMatchesCpuForEveryTransposeAndDtype) {
  std::mt19937 rng(11);
  for (const Types& types : kTypeMixes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        check_matmul(37, 53, 91, ta, tb, types, 1.0f, 0.0f, rng);
        check_matmul(5, 1, 7, ta, tb, types, 0.75f, 1.0f, rng);
      }
}

// x W^T with 1..4 rows in bf16 takes the skinny kernel (kernels/cuda/gemm_skinny.cu); 5 rows and K not a multiple of
// 8 take cuBLASLt. Both match the CPU.
TEST_F(CudaGemm, SkinnyDecodeShapesMatchCpu) {
  std::mt19937 rng(13);
  const Types bf16{DType::BF16, DType::BF16, DType::BF16};
  for (int64_t m : {1, 2, 3, 4, 5}) {
    check_matmul(m, 1024, 1024, false, true, bf16, 1.0f, 0.0f, rng);  // q_proj of the 0.6B shape
    check_matmul(m, 3000, 1024, false, true, bf16, 1.0f, 0.0f, rng);  // columns not a multiple of the block's 8
    check_matmul(m, 64, 3072, false, true, bf16, 1.0f, 0.0f, rng);    // down_proj's K
    check_matmul(m, 1024, 2048, false, true, bf16, 1.0f, 1.0f, rng);  // o_proj adding into the residual (beta 1)
    check_matmul(m, 64, 4096, false, true, bf16, 1.0f, 0.0f, rng);    // the most a lane loads before its wait
    check_matmul(m, 64, 5120, false, true, bf16, 1.0f, 1.0f, rng);    // more: the rest is read after the wait
    check_matmul(m, 72, 12288, false, true, bf16, 1.0f, 0.0f, rng);   // the 8B down_proj's K: whole batches of it
  }
  // Four rows of 16384 (128 KB) are more than the kernel stages in shared memory: each warp reads x itself.
  check_matmul(4, 100, 16384, false, true, bf16, 1.0f, 0.0f, rng);
  check_matmul(4, 100, 16384, false, true, bf16, 1.0f, 1.0f, rng);
  check_matmul(1, 100, 1001, false, true, bf16, 1.0f, 0.0f, rng);
  check_matmul(2, 100, 64, false, true, bf16, 0.5f, 1.0f, rng);
}

// Several rows take the skinny kernel only while the rows times the weight's bytes are at most
// kSkinnySeveralRowsMostBytes (two rows over twice the weight four rows take); one row for any weight; five rows
// for none.
TEST_F(CudaGemm, SkinnyKernelTakesSeveralRowsOnlyOverSmallWeights) {
  const int64_t k = 1024;
  auto most_columns = [&](int64_t m) { return ops::cuda::kSkinnySeveralRowsMostBytes / (m * 2 * k); };
  auto weight = [&](int64_t columns) { return Tensor::empty({columns, k}, DType::BF16, gpu()); };
  auto takes = [&](int64_t m, const Tensor& w) {
    const Tensor x = Tensor::empty({m, k}, DType::BF16, gpu());
    const Tensor out = Tensor::empty({m, w.dim(0)}, DType::BF16, gpu());
    return ops::cuda::skinny_matmul_applies(x, false, w, true, out, 1.0f, 0.0f);
  };
  const Tensor two_rows_most = weight(most_columns(2)), four_rows_most = weight(most_columns(4));
  EXPECT_TRUE(takes(2, two_rows_most));
  EXPECT_FALSE(takes(2, weight(most_columns(2) + 8)));
  EXPECT_TRUE(takes(4, four_rows_most));
  EXPECT_FALSE(takes(4, two_rows_most));
  EXPECT_TRUE(takes(1, weight(4 * most_columns(2))));
  EXPECT_FALSE(takes(5, weight(64)));
  auto swiglu_takes = [&](int64_t m, const Tensor& gate_up) {
    const Tensor x = Tensor::empty({m, k}, DType::BF16, gpu());
    return ops::cuda::skinny_swiglu_applies(x, gate_up, Tensor::empty({m, gate_up.dim(0) / 2}, DType::BF16, gpu()));
  };
  EXPECT_TRUE(swiglu_takes(4, four_rows_most));
  EXPECT_FALSE(swiglu_takes(4, two_rows_most));
}

// Wide outputs (an LM head's): the skinny kernel's warps stay resident and come back for columns a grid of warps
// further on, each with its next columns' loads in flight. 40,000 columns for one row, and for several rows about as
// many as the kernel takes them for (kSkinnySeveralRowsMostBytes), are several such rounds on any GPU; every
// column still matches the CPU, with the residual add and with the norm in front (the bits of the norm, then the
// GEMM).
TEST_F(CudaGemm, SkinnyGemmCoversColumnsBeyondOneRoundOfItsWarps) {
  std::mt19937 rng(29);
  const Types bf16{DType::BF16, DType::BF16, DType::BF16};
  for (int64_t m : {1, 2, 4})
    for (int64_t k : {1024, 2048}) {  // four and two columns a warp for one row
      const int64_t n = m == 1 ? 40000 : ops::cuda::kSkinnySeveralRowsMostBytes / (m * 2 * k) - 5;
      check_matmul(m, n, k, false, true, bf16, 1.0f, m == 2 ? 1.0f : 0.0f, rng);
      SCOPED_TRACE(fmt::format("norm in front, m {} k {}", m, k));
      const Tensor x = to_gpu(random_f32({m, k}, rng), DType::BF16);
      const Tensor gain = to_gpu(random_f32({k}, rng), DType::BF16);
      const Tensor w = to_gpu(random_f32({n, k}, rng), DType::BF16);
      Tensor normed = Tensor::empty({m, k}, DType::BF16, gpu()), rstd = Tensor::empty({m}, DType::F32, gpu());
      ops::rmsnorm_forward(x, gain, 1e-6f, normed, rstd);
      Tensor want = Tensor::empty({m, n}, DType::BF16, gpu()), got = Tensor::empty({m, n}, DType::BF16, gpu());
      ops::matmul(normed, false, w, true, want);
      ops::rmsnorm_matmul(x, gain, 1e-6f, w, got);
      EXPECT_TRUE(bitwise_equal(got, want));
    }
}

// matmul_swiglu on the GPU: the skinny kernel (1..4 rows) gives the bits of the skinny GEMM into gate_up followed by
// swiglu_fused_forward; 5 rows and an f32 input run those two ops. All are within bf16 rounding of the CPU.
TEST_F(CudaGemm, MatmulSwigluIsTheGemmThenSwiglu) {
  std::mt19937 rng(17);
  const int64_t intermediate = 1000;
  for (const DType dtype : {DType::BF16, DType::F32})
    for (const int64_t m : {1, 2, 4, 5})
      for (const int64_t k : {1024, 4096}) {  // 4096: part of each row is read after the kernel's wait
        SCOPED_TRACE(fmt::format("m {} k {} {}", m, k, dtype_name(dtype)));
        const Tensor x = representable(random_f32({m, k}, rng), DType::BF16);
        const Tensor gate_up = representable(random_f32({2 * intermediate, k}, rng), DType::BF16);
        const Tensor x_gpu = to_gpu(x, dtype), gate_up_gpu = to_gpu(gate_up, dtype);
        Tensor product = Tensor::empty({m, 2 * intermediate}, dtype, gpu());
        ops::matmul(x_gpu, false, gate_up_gpu, true, product);
        Tensor two_ops = Tensor::empty({m, intermediate}, dtype, gpu());
        ops::swiglu_fused_forward(product, two_ops);
        Tensor fused = Tensor::empty({m, intermediate}, dtype, gpu());
        ops::matmul_swiglu(x_gpu, gate_up_gpu, fused);
        EXPECT_TRUE(bitwise_equal(fused, two_ops));
        Tensor want = Tensor::empty({m, intermediate}, DType::F32);
        ops::matmul_swiglu(x, gate_up, want);
        EXPECT_TRUE(close_to(fused, want, rtol_for(dtype)));
      }
}

// matmul_swiglu's skinny kernel over wide outputs (its warps come back for columns a grid further on: 20,000
// columns for one row, 8,000 and 3,000 for several, short of kSkinnySeveralRowsMostBytes) and over rows too long to
// stage (four rows of 16,384: each warp reads x), with and without the norm in front: the bits of the GEMM into
// gate_up followed by swiglu_fused_forward (and of the norm before them).
TEST_F(CudaGemm, SkinnySwigluCoversWideOutputsAndUnstagedRows) {
  std::mt19937 rng(31);
  struct Shape3 {
    int64_t m, intermediate, k;
  };
  for (const Shape3 c : {Shape3{1, 20000, 1024}, Shape3{2, 8000, 1024}, Shape3{4, 3000, 2048}, Shape3{4, 300, 16384}}) {
    SCOPED_TRACE(fmt::format("m {} intermediate {} k {}", c.m, c.intermediate, c.k));
    const Tensor x = to_gpu(random_f32({c.m, c.k}, rng), DType::BF16);
    const Tensor gain = to_gpu(random_f32({c.k}, rng), DType::BF16);
    const Tensor gate_up = to_gpu(random_f32({2 * c.intermediate, c.k}, rng), DType::BF16);
    Tensor product = Tensor::empty({c.m, 2 * c.intermediate}, DType::BF16, gpu());
    ops::matmul(x, false, gate_up, true, product);
    Tensor want = Tensor::empty({c.m, c.intermediate}, DType::BF16, gpu());
    ops::swiglu_fused_forward(product, want);
    Tensor got = Tensor::empty({c.m, c.intermediate}, DType::BF16, gpu());
    ops::matmul_swiglu(x, gate_up, got);
    EXPECT_TRUE(bitwise_equal(got, want));
    Tensor normed = Tensor::empty({c.m, c.k}, DType::BF16, gpu()), rstd = Tensor::empty({c.m}, DType::F32, gpu());
    ops::rmsnorm_forward(x, gain, 1e-6f, normed, rstd);
    ops::matmul_swiglu(normed, gate_up, want);
    ops::rmsnorm_matmul_swiglu(x, gain, 1e-6f, gate_up, got);
    EXPECT_TRUE(bitwise_equal(got, want));
  }
}

// rmsnorm_matmul and rmsnorm_matmul_swiglu on the GPU: for bf16 rows of at most 4 one kernel normalises and
// multiplies with the bits of rmsnorm_forward followed by the skinny GEMM (or matmul_swiglu); rows of 64 (the norm's
// 16-lane groups), 1024, 4096 and 5120 (read partly after the wait). 5 rows and f32 run the two ops.
TEST_F(CudaGemm, RmsnormMatmulIsTheNormThenTheGemm) {
  std::mt19937 rng(23);
  for (const DType dtype : {DType::BF16, DType::F32})
    for (const int64_t m : {1, 3, 4, 5})
      for (const int64_t k : {64, 1024, 4096, 5120}) {
        SCOPED_TRACE(fmt::format("m {} k {} {}", m, k, dtype_name(dtype)));
        const int64_t n = 200;
        const Tensor x = to_gpu(random_f32({m, k}, rng), dtype), gain = to_gpu(random_f32({k}, rng), dtype);
        const Tensor w = to_gpu(random_f32({2 * n, k}, rng), dtype);
        Tensor normed = Tensor::empty({m, k}, dtype, gpu()), rstd = Tensor::empty({m}, DType::F32, gpu());
        ops::rmsnorm_forward(x, gain, 1e-6f, normed, rstd);
        Tensor want = Tensor::empty({m, 2 * n}, dtype, gpu()), got = Tensor::empty({m, 2 * n}, dtype, gpu());
        ops::matmul(normed, false, w, true, want);
        ops::rmsnorm_matmul(x, gain, 1e-6f, w, got);
        EXPECT_TRUE(bitwise_equal(got, want));
        Tensor want_act = Tensor::empty({m, n}, dtype, gpu()), got_act = Tensor::empty({m, n}, dtype, gpu());
        ops::matmul_swiglu(normed, w, want_act);
        ops::rmsnorm_matmul_swiglu(x, gain, 1e-6f, w, got_act);
        EXPECT_TRUE(bitwise_equal(got_act, want_act));
      }
}

// A decode-like chain of norms and skinny GEMMs (residual adds, SwiGLU, norms inside GEMMs) with a cuBLASLt GEMM
// among them, each reading what the kernel before it wrote. Under OverlappedLaunches every kernel starts while the
// one before still runs and loads its weights before waiting: op by op and recorded into a graph, the chain gives the
// bits of the same chain launched one after the other.
TEST_F(CudaGemm, OverlappedLaunchesGiveTheSerialBits) {
  std::mt19937 rng(19);
  const int64_t m = 2, d = 1024, intermediate = 3072;
  const Tensor x0 = to_gpu(random_f32({m, d}, rng), DType::BF16);
  const Tensor gain = to_gpu(representable(random_f32({d}, rng), DType::BF16), DType::BF16);
  const Tensor w_in = to_gpu(random_f32({d, d}, rng), DType::BF16);
  const Tensor w_out = to_gpu(random_f32({d, d}, rng), DType::BF16);
  const Tensor gate_up = to_gpu(random_f32({2 * intermediate, d}, rng), DType::BF16);
  const Tensor down = to_gpu(random_f32({d, intermediate}, rng), DType::BF16);
  auto chain = [&](Tensor& h) {
    h.copy_from(x0);
    for (int layer = 0; layer < 6; ++layer) {
      Tensor normed = Tensor::empty({m, d}, DType::BF16, gpu()), rstd = Tensor::empty({m}, DType::F32, gpu());
      ops::rmsnorm_forward(h, gain, 1e-6f, normed, rstd);
      Tensor mixed = Tensor::empty({m, d}, DType::BF16, gpu());
      ops::matmul(normed, false, w_in, true, mixed);
      ops::matmul(mixed, false, w_out, true, h, 1.0f, 1.0f);
      ops::rmsnorm_matmul(h, gain, 1e-6f, w_in, mixed);  // the norm inside the GEMM
      ops::matmul(mixed, false, w_out, true, h, 0.5f, 1.0f);  // alpha 0.5: cuBLASLt, launched normally
      Tensor act = Tensor::empty({m, intermediate}, DType::BF16, gpu());
      ops::rmsnorm_matmul_swiglu(h, gain, 1e-6f, gate_up, act);
      ops::matmul(act, false, down, true, h, 1.0f, 1.0f);
    }
  };
  Tensor serial = Tensor::empty({m, d}, DType::BF16, gpu());
  chain(serial);
  Tensor eager = Tensor::empty({m, d}, DType::BF16, gpu());
  {
    const OverlappedLaunches overlapped;
    ASSERT_TRUE(OverlappedLaunches::active()) << "VEOMNI_OVERLAP_LAUNCHES=0 is set";
    chain(eager);
  }
  EXPECT_FALSE(OverlappedLaunches::active());
  EXPECT_TRUE(bitwise_equal(eager, serial));
  Tensor graphed = Tensor::empty({m, d}, DType::BF16, gpu());
  StepGraph graph;
  graph.capture(gpu(), [&] {
    const OverlappedLaunches overlapped;
    chain(graphed);
  });
  for (int replay = 0; replay < 3; ++replay) {
    ops::fill_(graphed, 0.0f);
    graph.replay();
    EXPECT_TRUE(bitwise_equal(graphed, serial)) << "replay " << replay;
  }
  EXPECT_TRUE(std::isfinite(ops::sum_squares(serial)));
}

TEST_F(CudaGemm, MatmulAtModelShapes) {
  std::mt19937 rng(12);
  check_matmul(256, 384, 1024, false, true, {DType::BF16, DType::BF16, DType::BF16}, 1.0f, 0.0f, rng);  // x W^T
  check_matmul(384, 1024, 256, true, false, {DType::BF16, DType::BF16, DType::F32}, 1.0f, 1.0f, rng);   // dW += dy^T x
  check_matmul(129, 257, 1000, false, false, {DType::F32, DType::F32, DType::F32}, -2.0f, 0.5f, rng);
}

// An addend in place of out on the right (cuBLASLt's C != D, or a copy into out for the skinny kernel, the staged
// f32-to-bf16 path and k = 0) against the CPU; out starts as NaN, which must not be read.
TEST_F(CudaGemm, MatmulAddsAnAddendInsteadOfOut) {
  std::mt19937 rng(19);
  const DType bf = DType::BF16, f32 = DType::F32;
  struct Case {
    int64_t m, n, k;
    Types types;
  };
  for (const Case& c : {Case{300, 256, 512, {bf, bf, bf}}, Case{37, 53, 91, {f32, f32, f32}},
                        Case{37, 53, 91, {f32, f32, bf}}, Case{3, 1024, 2048, {bf, bf, bf}},
                        Case{5, 7, 0, {bf, bf, bf}}}) {
    SCOPED_TRACE(fmt::format("m {} n {} k {} {}", c.m, c.n, c.k, describe_types(c.types)));
    const Tensor a = representable(random_f32({c.m, c.k}, rng), c.types.a);
    const Tensor b = representable(random_f32({c.n, c.k}, rng), c.types.b);
    const Tensor addend = representable(random_f32({c.m, c.n}, rng), c.types.out);
    Tensor want = addend.clone();
    ops::matmul(a, false, b, true, want, 1.0f, 1.0f);
    Tensor got = Tensor::full<float>({c.m, c.n}, NAN).to_dtype(c.types.out).to(gpu());
    const Tensor gaddend = to_gpu(addend, c.types.out);
    ops::matmul(to_gpu(a, c.types.a), false, to_gpu(b, c.types.b), true, got, 1.0f, 1.0f, gaddend);
    EXPECT_TRUE(close_to(got, want, rtol_for(c.types.out)));
    EXPECT_TRUE(close_to(gaddend, addend, 0.0));
  }
}

TEST_F(CudaGemm, BetaZeroOverwritesNaNAndEmptyInnerDimensionScales) {
  std::mt19937 rng(13);
  const Tensor a = random_f32({4, 6}, rng), b = random_f32({6, 3}, rng);
  Tensor out = Tensor::full<float>({4, 3}, NAN).to(gpu());
  ops::matmul(a.to(gpu()), false, b.to(gpu()), false, out, 1.0f, 0.0f);
  Tensor want = Tensor::zeros({4, 3}, DType::F32);
  ops::matmul(a, false, b, false, want);
  EXPECT_TRUE(close_to(out, want, kF32Rtol));

  // k = 0: out = beta * out, and beta = 0 clears NaN.
  const Tensor a0 = Tensor::empty({4, 0}, DType::F32, gpu()), b0 = Tensor::empty({0, 3}, DType::F32, gpu());
  Tensor halved = Tensor::full<float>({4, 3}, 2.0f).to(gpu());
  ops::matmul(a0, false, b0, false, halved, 1.0f, 0.5f);
  EXPECT_TRUE(close_to(halved, Tensor::full<float>({4, 3}, 1.0f), 0.0));
  Tensor cleared = Tensor::full<float>({4, 3}, NAN).to(gpu());
  ops::matmul(a0, false, b0, false, cleared, 1.0f, 0.0f);
  EXPECT_TRUE(close_to(cleared, Tensor::zeros({4, 3}, DType::F32), 0.0));
  // m = 0 does nothing.
  Tensor none = Tensor::empty({0, 3}, DType::F32, gpu());
  ops::matmul(Tensor::empty({0, 6}, DType::F32, gpu()), false, b.to(gpu()), false, none);
}

TEST_F(CudaGemm, MatmulErrorsAreReported) {
  const Tensor a = Tensor::zeros({4, 6}, DType::F32, gpu());
  const Tensor b = Tensor::zeros({5, 3}, DType::F32, gpu());
  Tensor out = Tensor::zeros({4, 3}, DType::F32, gpu());
  EXPECT_THROW(ops::matmul(a, false, b, false, out), Error);  // inner dimensions differ
  const Tensor b_cpu = Tensor::zeros({6, 3}, DType::F32);
  EXPECT_THROW(ops::matmul(a, false, b_cpu, false, out), Error);  // devices differ
  const Tensor a_f16 = Tensor::zeros({4, 6}, DType::F16, gpu());
  EXPECT_THROW(ops::matmul(a_f16, false, b_cpu.to(gpu()), false, out), Error);  // f16 is not an activation dtype
}

const std::vector<int64_t> kGroups{3, 0, 17, 1, 9, 0};

TEST_F(CudaGemm, GroupedMatmulMatchesCpuWithEmptyGroups) {
  std::mt19937 rng(14);
  const int64_t t = 30, k = 40, n = 24, g = static_cast<int64_t>(kGroups.size());
  for (const Types& types : kTypeMixes)
    for (bool trans_w : {false, true}) {
      SCOPED_TRACE(fmt::format("{} trans_w {}", describe_types(types), trans_w));
      const Tensor x = representable(random_f32({t, k}, rng), types.a);
      const Tensor w = representable(random_f32(trans_w ? Shape{g, n, k} : Shape{g, k, n}, rng), types.b);
      Tensor want = Tensor::empty({t, n}, DType::F32);
      ops::grouped_matmul(x, w, trans_w, kGroups, want);
      Tensor got = Tensor::full<float>({t, n}, NAN).to_dtype(types.out).to(gpu());
      ops::grouped_matmul(to_gpu(x, types.a), to_gpu(w, types.b), trans_w, kGroups, got);
      EXPECT_TRUE(close_to(got, want, rtol_for(types.out)));
    }
}

TEST_F(CudaGemm, GroupedWeightGradMatchesCpuAndAccumulates) {
  std::mt19937 rng(15);
  const int64_t t = 30, k = 40, n = 24, g = static_cast<int64_t>(kGroups.size());
  for (const Types& types : kTypeMixes)
    for (bool accumulate : {false, true}) {
      SCOPED_TRACE(fmt::format("{} accumulate {}", describe_types(types), accumulate));
      const Tensor dy = representable(random_f32({t, n}, rng), types.a);
      const Tensor x = representable(random_f32({t, k}, rng), types.b);
      const Tensor dw0 = representable(random_f32({g, n, k}, rng), types.out);
      Tensor want = dw0.clone();
      ops::grouped_matmul_weight_grad(dy, x, kGroups, want, accumulate);
      Tensor got = to_gpu(dw0, types.out);
      ops::grouped_matmul_weight_grad(to_gpu(dy, types.a), to_gpu(x, types.b), kGroups, got, accumulate);
      EXPECT_TRUE(close_to(got, want, rtol_for(types.out)));
    }
}

TEST_F(CudaGemm, GroupedMatmulRejectsBadGroupSizes) {
  const Tensor x = Tensor::zeros({6, 4}, DType::BF16, gpu());
  const Tensor w = Tensor::zeros({2, 3, 4}, DType::BF16, gpu());
  Tensor out = Tensor::zeros({6, 3}, DType::F32, gpu());
  EXPECT_THROW(ops::grouped_matmul(x, w, true, {2, 3}, out), Error);      // sum 5 != 6 rows
  EXPECT_THROW(ops::grouped_matmul(x, w, true, {7, -1}, out), Error);     // negative
  EXPECT_THROW(ops::grouped_matmul(x, w, true, {6}, out), Error);         // one size for two groups
  EXPECT_NO_THROW(ops::grouped_matmul(x, w, true, {6, 0}, out));
}

}  // namespace
