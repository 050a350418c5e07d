// Tests of the op profiler on the CPU backend: names and shape classes, call counts, FLOP counts, the report, and
// that nothing is recorded while it is off or when a call fails its checks.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "kernels/fp8_ops.h"
#include "kernels/op_profiler.h"
#include "kernels/ops.h"

using namespace veomni;

namespace {

class OpProfiler : public ::testing::Test {
 protected:
  void SetUp() override {
    op_profile_set_enabled_for_testing(false);
    op_profile_reset();
  }
  void TearDown() override {
    op_profile_set_enabled_for_testing(false);
    op_profile_reset();
  }
};

std::map<std::string, int64_t> calls_by_name(const std::vector<OpProfileRow>& rows) {
  std::map<std::string, int64_t> out;
  for (const OpProfileRow& r : rows) out[r.name] = r.calls;
  return out;
}

// Two fills, one matmul [4,3] x [5,3]^T and one sum.
void run_a_few_ops() {
  Tensor a = Tensor::empty({4, 3}, DType::F32), b = Tensor::empty({5, 3}, DType::F32);
  Tensor out = Tensor::empty({4, 5}, DType::F32);
  ops::fill_(a, 1.0f);
  ops::fill_(b, 2.0f);
  ops::matmul(a, false, b, true, out);
  EXPECT_EQ(ops::sum(out), 4.0 * 5.0 * 6.0);  // the timed path still returns the op's value
}

TEST_F(OpProfiler, DisabledRecordsNothing) {
  EXPECT_FALSE(op_profile_enabled());
  run_a_few_ops();
  EXPECT_TRUE(op_profile_rows().empty());
  EXPECT_EQ(op_profile_report(), "op profile: no op calls recorded\n");
}

TEST_F(OpProfiler, CountsCallsPerOpAndGemmShape) {
  op_profile_set_enabled_for_testing(true);
  run_a_few_ops();
  run_a_few_ops();
  Tensor wide = Tensor::full<float>({3, 4}, 1.0f), c = Tensor::empty({3, 5}, DType::F32);
  Tensor b = Tensor::full<float>({4, 5}, 1.0f);
  ops::matmul(wide, false, b, false, c);
  const std::vector<OpProfileRow> rows = op_profile_rows();
  const std::map<std::string, int64_t> want{{"fill_", 4}, {"matmul NT 4x5x3", 2}, {"sum", 2}, {"matmul NN 3x5x4", 1}};
  EXPECT_EQ(calls_by_name(rows), want);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_GE(rows[i].total_ms, 0.0) << rows[i].name;
    if (i > 0) {
      EXPECT_GE(rows[i - 1].total_ms, rows[i].total_ms) << "rows sorted by time";
    }
    const double want_flops = rows[i].name == "matmul NT 4x5x3" ? 2 * 2.0 * 4 * 5 * 3
                              : rows[i].name == "matmul NN 3x5x4" ? 2.0 * 3 * 5 * 4
                                                                  : 0.0;
    EXPECT_EQ(rows[i].flops, want_flops) << rows[i].name;
    EXPECT_EQ(rows[i].bytes, 0.0) << rows[i].name;
  }
}

TEST_F(OpProfiler, AttentionFlopsCountCausalPairsOnly) {
  op_profile_set_enabled_for_testing(true);
  const Tensor q = Tensor::full<float>({5, 2, 4}, 0.5f), kv = Tensor::full<float>({5, 1, 4}, 0.25f);
  Tensor out = Tensor::empty({5, 2, 4}, DType::F32), lse = Tensor::empty({2, 5}, DType::F32);
  ops::attention_forward(q, kv, kv, {0, 3, 5}, true, 0.5f, out, lse);
  const std::vector<OpProfileRow> rows = op_profile_rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].name, "attention_forward 5x2x1x4");
  EXPECT_EQ(rows[0].calls, 1);
  // Causal pairs 3*4/2 + 2*3/2 = 9; 4 FLOPs per pair, head and head dim: 4 * 9 * 2 * 4.
  EXPECT_EQ(rows[0].flops, 288.0);
}

TEST_F(OpProfiler, Fp8OpsAreTimedWithTheirShapes) {
  op_profile_set_enabled_for_testing(true);
  const Tensor x = Tensor::full<float>({4, 32}, 0.5f), w = Tensor::full<float>({16, 32}, 0.25f);
  Tensor qx = Tensor::empty({4, 32}, DType::U8), sx = Tensor::empty({4}, DType::F32);
  Tensor qw = Tensor::empty({16, 32}, DType::U8), sw = Tensor::empty({16}, DType::F32);
  Tensor qwt = Tensor::empty({32, 16}, DType::U8), swt = Tensor::empty({32}, DType::F32);
  Tensor y = Tensor::empty({4, 16}, DType::F32);
  ops::quantize_fp8_rows(x, qx, sx);
  ops::quantize_fp8_rows(w, qw, sw);
  ops::quantize_fp8_cols_transposed(w, qwt, swt);
  ops::matmul_fp8_tn(qx, sx, qw, sw, y);
  const std::vector<OpProfileRow> rows = op_profile_rows();
  const std::map<std::string, int64_t> want{{"quantize_fp8_rows 4x32", 1}, {"quantize_fp8_rows 16x32", 1},
                                            {"quantize_fp8_cols_transposed 16x32", 1}, {"matmul_fp8 TN 4x16x32", 1}};
  EXPECT_EQ(calls_by_name(rows), want);
  for (const OpProfileRow& r : rows) EXPECT_EQ(r.flops, r.name == "matmul_fp8 TN 4x16x32" ? 2.0 * 4 * 16 * 32 : 0.0);
}

TEST_F(OpProfiler, CallsThatFailTheirChecksAreNotRecorded) {
  op_profile_set_enabled_for_testing(true);
  const Tensor a = Tensor::empty({4, 3}, DType::F32), b = Tensor::empty({4, 3}, DType::F32);
  Tensor out = Tensor::empty({4, 4}, DType::F32);
  EXPECT_THROW(ops::matmul(a, false, b, false, out), Error);
  EXPECT_TRUE(op_profile_rows().empty());
}

TEST_F(OpProfiler, ReportListsEveryRowAndTheSpan) {
  op_profile_set_enabled_for_testing(true);
  run_a_few_ops();
  const std::string report = op_profile_report();
  EXPECT_NE(report.find("op profile (cpu, steady_clock timings)"), std::string::npos) << report;
  EXPECT_NE(report.find("mean us"), std::string::npos) << report;
  for (const char* name : {"fill_", "matmul NT 4x5x3", "sum"}) EXPECT_NE(report.find(name), std::string::npos) << name;
  EXPECT_NE(report.find("cpu: 4 calls; profiled span"), std::string::npos) << report;
  EXPECT_NE(report.find("FLOP/s"), std::string::npos) << report;  // the matmul's rate
  EXPECT_EQ(report.find("cuda"), std::string::npos) << report;
}

TEST_F(OpProfiler, ResetDropsTheTable) {
  op_profile_set_enabled_for_testing(true);
  run_a_few_ops();
  EXPECT_FALSE(op_profile_rows().empty());
  op_profile_reset();
  EXPECT_TRUE(op_profile_rows().empty());
  run_a_few_ops();
  EXPECT_EQ(calls_by_name(op_profile_rows()).at("fill_"), 2);
}

// With VEOMNI_PROFILE_OPS set, the first timed call installs the exit report: stderr on rank 0, and the rank file.
TEST_F(OpProfiler, ExitReportGoesToStderrAndTheRankFile) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process, so the exit hook is installed there
  const std::string path = ::testing::TempDir() + "veomni_op_profile_exit_test";
  std::remove((path + ".rank0").c_str());
  EXPECT_EXIT(
      {
        setenv("OMPI_COMM_WORLD_RANK", "0", 1);
        op_profile_configure(true, path);  // what a run's train.op_profile does
        run_a_few_ops();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "op profile \\(cpu, steady_clock timings\\)");
  std::ifstream in(path + ".rank0");
  ASSERT_TRUE(in) << path << ".rank0 was not written";
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("matmul NT 4x5x3"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("cpu: 4 calls; profiled span"), std::string::npos) << text.str();
  std::remove((path + ".rank0").c_str());
}

}  // namespace
