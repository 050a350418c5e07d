// GPU test of the op profiler: CUDA ops are timed with events on the compute stream, counted per op and shape class,
// resolved without a sync per op (also across the lazy sweeps), and reported under "cuda".
#include <map>
#include <string>

#include "gpu_test_util.h"
#include "kernels/op_profiler.h"
#include "kernels/ops.h"

using namespace veomni;
using namespace veomni::gpu_test;

namespace {

class CudaOpProfiler : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    op_profile_set_enabled_for_testing(false);
    op_profile_reset();
  }
  void TearDown() override {
    op_profile_set_enabled_for_testing(false);
    op_profile_reset();
  }
};

TEST_F(CudaOpProfiler, TimesEveryCudaOpWithPositiveDurations) {
  op_profile_set_enabled_for_testing(true);
  Tensor a = Tensor::empty({256, 512}, DType::BF16, gpu()), b = Tensor::empty({1024, 512}, DType::BF16, gpu());
  Tensor out = Tensor::empty({256, 1024}, DType::BF16, gpu());
  // More calls than one lazy sweep (every 256 pending calls), so both the sweep and the final flush resolve some.
  const int kRounds = 300;
  for (int i = 0; i < kRounds; ++i) {
    ops::fill_(a, 0.5f);
    ops::fill_(b, 0.25f);
    ops::matmul(a, false, b, true, out);
  }
  const double total = ops::sum(out);  // one host read, timed too
  EXPECT_DOUBLE_EQ(total, 256.0 * 1024.0 * 512.0 * 0.125);
  const std::vector<OpProfileRow> rows = op_profile_rows();
  std::map<std::string, int64_t> calls;
  for (const OpProfileRow& r : rows) {
    calls[r.name] = r.calls;
    EXPECT_GT(r.total_ms, 0.0) << r.name;
  }
  const std::map<std::string, int64_t> want{{"fill_", 2 * kRounds}, {"matmul NT 256x1024x512", kRounds}, {"sum", 1}};
  EXPECT_EQ(calls, want);
  const std::string report = op_profile_report();
  EXPECT_NE(report.find("op profile (cuda, CUDA event timings)"), std::string::npos) << report;
  EXPECT_NE(report.find("cuda: " + std::to_string(3 * kRounds + 1) + " calls; profiled span"), std::string::npos) << report;
  EXPECT_EQ(report.find("steady_clock"), std::string::npos) << report;
}

TEST_F(CudaOpProfiler, DisabledRecordsNothingOnTheGpu) {
  Tensor x = Tensor::empty({1000}, DType::F32, gpu());
  ops::fill_(x, 1.0f);
  EXPECT_EQ(ops::sum(x), 1000.0);
  EXPECT_TRUE(op_profile_rows().empty());
}

}  // namespace
