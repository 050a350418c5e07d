// GPU tests of the GEMM autotuning (kernels/cuda/gemm_autotune.h): the candidates' trials leave no trace in the
// output (exact whole-number results), the timed and the heuristic picks both match the CPU, grouped GEMMs never time
// candidates and reuse a choice timed for their exact key, and the VEOMNI_GEMM_AUTOTUNE values.
#include <spdlog/fmt/ranges.h>

#include "gpu_test_util.h"
#include "kernels/cuda/gemm_autotune.h"
#include "kernels/ops.h"

using namespace veomni;
using namespace veomni::gpu_test;
using ops::cuda::gemm_autotune_stats;
using ops::cuda::GemmAutotuneStats;

namespace {

class CudaGemmAutotune : public CudaTest {};

// Sets the autotuning mode for one scope and restores the one before.
class AutotuneMode {
 public:
  explicit AutotuneMode(bool on) : before_(ops::cuda::gemm_autotune_enabled()) { ops::cuda::set_gemm_autotune(on); }
  AutotuneMode(const AutotuneMode&) = delete;
  AutotuneMode& operator=(const AutotuneMode&) = delete;
  ~AutotuneMode() { ops::cuda::set_gemm_autotune(before_); }

 private:
  bool before_;
};

// A row count no earlier GEMM of this process used (also under --gtest_repeat), so that the call under test meets a
// new plan key and, with autotuning on, times its candidates in that very call.
int64_t fresh_rows() {
  static int64_t next = 1000;
  return next += 8;
}

// Whole numbers in [-r, r]. Products and sums of such numbers stay exact in f32 (below 2^24) and in bf16 (below 256)
// whatever order the GPU sums in, so a GEMM of them has exactly one right answer.
Tensor whole_numbers(const Shape& shape, int r, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(-r, r);
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(dist(rng));
  return t;
}

struct GemmCase {
  const char* name;
  int64_t n, k;
  bool ta, tb;
  DType in, out;
  float alpha, beta;
  int r_inputs, r_output;  // ranges of the whole numbers (small enough for exact bf16 outputs)
};

std::string describe_gemm_case(const GemmCase& c, int64_t m) {
  return fmt::format("{}: m {} n {} k {} trans {}/{} {}->{} alpha {} beta {}", c.name, m, c.n, c.k, c.ta, c.tb,
                     dtype_name(c.in), dtype_name(c.out), c.alpha, c.beta);
}

// The first call of a new key times the candidates (into a scratch output when it accumulates), the second reuses the
// choice; after each, the output is exactly what the CPU computes: one product added per call, no trial's trace.
TEST_F(CudaGemmAutotune, TrialsLeaveNoTraceInTheOutput) {
  const AutotuneMode on(true);
  std::mt19937 rng(21);
  const GemmCase cases[] = {
      {"lm_head dW += dlogits^T x", 200, 264, true, false, DType::BF16, DType::F32, 1.0f, 1.0f, 3, 50},
      {"dW += dy^T x, scaled", 136, 264, true, false, DType::BF16, DType::F32, 0.25f, 1.0f, 3, 50},
      {"x W^T accumulated into bf16", 120, 72, false, true, DType::BF16, DType::BF16, 1.0f, 1.0f, 1, 16},
      {"f32 inputs into a bf16 output", 96, 72, false, true, DType::F32, DType::BF16, 1.0f, 1.0f, 1, 16},
      {"f32 alpha/beta", 104, 264, false, true, DType::F32, DType::F32, 0.5f, -2.0f, 3, 50},
      {"overwrite (trials in place)", 112, 264, false, false, DType::BF16, DType::F32, 1.0f, 0.0f, 3, 50},
  };
  for (const GemmCase& c : cases) {
    const int64_t m = fresh_rows();
    SCOPED_TRACE(describe_gemm_case(c, m));
    const Tensor a = whole_numbers(c.ta ? Shape{c.k, m} : Shape{m, c.k}, c.r_inputs, rng);
    const Tensor b = whole_numbers(c.tb ? Shape{c.n, c.k} : Shape{c.k, c.n}, c.r_inputs, rng);
    Tensor want = c.beta == 0.0f ? Tensor::full<float>({m, c.n}, NAN) : whole_numbers({m, c.n}, c.r_output, rng);
    Tensor got = to_gpu(want, c.out);
    const Tensor a_gpu = to_gpu(a, c.in), b_gpu = to_gpu(b, c.in);
    for (int call = 0; call < 2; ++call) {
      SCOPED_TRACE(fmt::format("call {}", call));
      const GemmAutotuneStats before = gemm_autotune_stats();
      ops::matmul(a_gpu, c.ta, b_gpu, c.tb, got, c.alpha, c.beta);
      ops::matmul(a, c.ta, b, c.tb, want, c.alpha, c.beta);
      const GemmAutotuneStats after = gemm_autotune_stats();
      EXPECT_EQ(after.keys_tuned - before.keys_tuned, call == 0 ? 1u : 0u) << "the first call of a key times it, once";
      if (call == 0 && c.in == DType::BF16) {
        EXPECT_GE(after.candidates_timed - before.candidates_timed, 2u)
            << "cuBLASLt offered fewer than two bf16 algorithms: the trials were not exercised";
      }
      EXPECT_TRUE(close_to(got, want, 0.0));
    }
  }
}

// Random operands at tolerance: the heuristic's first pick (autotuning off, nothing timed) and the timed choice both
// agree with the CPU; a key first met with autotuning off is timed when it is on.
TEST_F(CudaGemmAutotune, TimedAndHeuristicPicksBothMatchTheCpu) {
  std::mt19937 rng(22);
  const GemmCase cases[] = {
      {"q_proj x W^T", 256, 128, false, true, DType::BF16, DType::BF16, 1.0f, 0.0f, 0, 0},
      {"o_proj dx = dy W", 256, 128, false, false, DType::BF16, DType::BF16, 1.0f, 0.0f, 0, 0},
      {"dW += dy^T x", 128, 256, true, false, DType::BF16, DType::F32, 0.5f, 1.0f, 0, 0},
      {"f32 x W^T", 96, 200, false, true, DType::F32, DType::F32, 1.0f, 0.0f, 0, 0},
      {"f32 inputs into bf16", 96, 200, false, true, DType::F32, DType::BF16, -1.0f, 0.5f, 0, 0},
  };
  for (const GemmCase& c : cases) {
    const int64_t m = fresh_rows();
    const Tensor a = representable(random_f32(c.ta ? Shape{c.k, m} : Shape{m, c.k}, rng), c.in);
    const Tensor b = representable(random_f32(c.tb ? Shape{c.n, c.k} : Shape{c.k, c.n}, rng), c.in);
    const Tensor out0 = representable(random_f32({m, c.n}, rng), c.out);
    Tensor want = out0.clone();
    ops::matmul(a, c.ta, b, c.tb, want, c.alpha, c.beta);
    const Tensor a_gpu = to_gpu(a, c.in), b_gpu = to_gpu(b, c.in);
    // Off first (the key is then known untimed), then on: that call must time it.
    for (bool autotune : {false, true}) {
      SCOPED_TRACE(describe_gemm_case(c, m) + (autotune ? ", autotuned" : ", heuristic's first pick"));
      const AutotuneMode mode(autotune);
      Tensor got = to_gpu(out0, c.out);
      const GemmAutotuneStats before = gemm_autotune_stats();
      ops::matmul(a_gpu, c.ta, b_gpu, c.tb, got, c.alpha, c.beta);
      EXPECT_EQ(gemm_autotune_stats().keys_tuned - before.keys_tuned, autotune ? 1u : 0u);
      EXPECT_TRUE(close_to(got, want, rtol_for(c.out)));
    }
  }
}

int64_t total(const std::vector<int64_t>& sizes) {
  int64_t t = 0;
  for (int64_t s : sizes) t += s;
  return t;
}

// Expert loads that change every step (empty experts, one busy expert, all alike): forward, input gradient and
// accumulated weight gradient match the CPU, and none of these calls times anything.
TEST_F(CudaGemmAutotune, GroupedGemmsNeverTimeAndStayCorrect) {
  const AutotuneMode on(true);
  std::mt19937 rng(23);
  const int64_t n = 80, k = 96, g = 5;
  const std::vector<std::vector<int64_t>> steps = {
      {7, 0, 33, 1, 12}, {0, 0, 64, 0, 0}, {20, 19, 0, 5, 9}, {1, 1, 1, 1, 1}, {0, 0, 0, 0, 40}, {3, 70, 2, 0, 11}};
  const DType bf = DType::BF16;
  const Tensor w = representable(random_f32({g, n, k}, rng), bf);
  const Tensor w_gpu = to_gpu(w, bf);
  const GemmAutotuneStats before = gemm_autotune_stats();
  for (const std::vector<int64_t>& sizes : steps) {
    SCOPED_TRACE(fmt::format("group sizes {}", fmt::join(sizes, ",")));
    const int64_t t = total(sizes);
    const Tensor x = representable(random_f32({t, k}, rng), bf), dy = representable(random_f32({t, n}, rng), bf);
    const Tensor x_gpu = to_gpu(x, bf), dy_gpu = to_gpu(dy, bf);

    Tensor y_want = Tensor::empty({t, n}, DType::F32);
    ops::grouped_matmul(x, w, true, sizes, y_want);
    Tensor y = Tensor::full<float>({t, n}, NAN).to_dtype(bf).to(gpu());
    ops::grouped_matmul(x_gpu, w_gpu, true, sizes, y);
    EXPECT_TRUE(close_to(y, y_want, kBf16Rtol)) << "forward";

    Tensor dx_want = Tensor::empty({t, k}, DType::F32);
    ops::grouped_matmul(dy, w, false, sizes, dx_want);
    Tensor dx = Tensor::full<float>({t, k}, NAN).to(gpu());
    ops::grouped_matmul(dy_gpu, w_gpu, false, sizes, dx);
    EXPECT_TRUE(close_to(dx, dx_want, kF32Rtol)) << "input gradient";

    const Tensor dw0 = random_f32({g, n, k}, rng);
    Tensor dw_want = dw0.clone();
    ops::grouped_matmul_weight_grad(dy, x, sizes, dw_want, true);
    Tensor dw = dw0.to(gpu());
    ops::grouped_matmul_weight_grad(dy_gpu, x_gpu, sizes, dw, true);
    EXPECT_TRUE(close_to(dw, dw_want, kF32Rtol)) << "accumulated weight gradient";
  }
  const GemmAutotuneStats after = gemm_autotune_stats();
  EXPECT_EQ(after.keys_tuned, before.keys_tuned);
  EXPECT_EQ(after.candidates_timed, before.candidates_timed);
}

// A grouped GEMM with one busy expert is one cuBLASLt call whose key a plain matmul may have timed: it then uses that
// choice, so it gives the plain matmul's result bit for bit, and times nothing itself.
TEST_F(CudaGemmAutotune, AGroupReusesTheChoiceTimedForItsExactKey) {
  const AutotuneMode on(true);
  std::mt19937 rng(24);
  const int64_t rows = fresh_rows(), n = 136, k = 120;
  const DType bf = DType::BF16;
  const Tensor x = representable(random_f32({rows, k}, rng), bf);
  const Tensor w = representable(random_f32({2, n, k}, rng), bf);
  const Tensor x_gpu = to_gpu(x, bf), w_gpu = to_gpu(w, bf);

  // f32 outputs: two algorithms' different summation orders show in the low bits (a bf16 output would round them off).
  Tensor plain = Tensor::empty({rows, n}, DType::F32, gpu());
  GemmAutotuneStats before = gemm_autotune_stats();
  ops::matmul(x_gpu, false, w_gpu.select(0), true, plain);  // the same operands, leading dimensions and alignments
  EXPECT_EQ(gemm_autotune_stats().keys_tuned - before.keys_tuned, 1u);

  Tensor grouped = Tensor::full<float>({rows, n}, NAN).to(gpu());
  before = gemm_autotune_stats();
  ops::grouped_matmul(x_gpu, w_gpu, true, {rows, 0}, grouped);
  EXPECT_EQ(gemm_autotune_stats().keys_tuned, before.keys_tuned);
  EXPECT_TRUE(bitwise_equal(grouped, plain));

  Tensor want = Tensor::empty({rows, n}, DType::F32);
  ops::grouped_matmul(x, w, true, {rows, 0}, want);
  EXPECT_TRUE(close_to(grouped, want, kF32Rtol));
}

// No GPU needed: what each VEOMNI_GEMM_AUTOTUNE value means, and the override.
TEST(CudaGemmAutotuneMode, EnvironmentValuesAndOverride) {
  EXPECT_FALSE(ops::cuda::gemm_autotune_from_env_value(nullptr));  // off unless asked for
  EXPECT_FALSE(ops::cuda::gemm_autotune_from_env_value(""));
  EXPECT_TRUE(ops::cuda::gemm_autotune_from_env_value("1"));
  EXPECT_FALSE(ops::cuda::gemm_autotune_from_env_value("0"));
  EXPECT_FALSE(ops::cuda::gemm_autotune_from_env_value("maybe"));  // warns, stays off
  {
    const AutotuneMode off(false);
    EXPECT_FALSE(ops::cuda::gemm_autotune_enabled());
    {
      const AutotuneMode on(true);
      EXPECT_TRUE(ops::cuda::gemm_autotune_enabled());
    }
    EXPECT_FALSE(ops::cuda::gemm_autotune_enabled());
  }
}

}  // namespace
