// Unit tests of the run's start-up safeguards: lazy epoch plans, the output-directory lock and its checks, the
// stop-signal flag, the data-coverage report and the non-finite weight check.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <fstream>
#include <string>

#include "core/error.h"
#include "data/batch.h"
#include "data/dataset_reader.h"
#include "data/dataset_writer.h"
#include "model/hf_loader.h"
#include "model/weight_source.h"
#include "tests/common/scratch_dir.h"
#include "train/data_coverage.h"
#include "train/epoch_plans.h"
#include "train/output_dir_lock.h"
#include "train/stop_signal.h"

using namespace veomni;

namespace {

using TrainReliabilityTest = veomni::testing::ScratchDir;

std::vector<int64_t> lengths_of(int64_t n) {
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < n; ++i) lengths.push_back(5 + (i * 37) % 60);
  return lengths;
}

BatchPlanOptions plan_options(bool shuffle) {
  BatchPlanOptions o;
  o.token_budget = 64;
  o.max_seq_len = 64;
  o.micro_batches_per_step = 2;
  o.shuffle = shuffle;
  return o;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A text dataset whose samples have the given lengths and labels (-100 everywhere when `no_labels`).
void write_labelled(const std::string& path, const std::vector<int64_t>& lengths, bool no_labels) {
  DatasetInfo info;
  info.kind = "text";
  info.producer = "test";
  info.producer_version = "0";
  info.packing = "none";
  info.max_seq_len = 64;
  info.tokenizer = "test";
  DatasetWriter writer(path, info);
  for (int64_t length : lengths) {
    Sample s;
    s["input_ids"] = Tensor::full<int64_t>({length}, 7);
    s["labels"] = Tensor::full<int64_t>({length}, no_labels ? kIgnoreIndex : 7);
    writer.append(s);
  }
  writer.close();
}

}  // namespace

TEST(EpochPlans, CountsMatchPlanningEveryEpoch) {
  for (bool shuffle : {true, false})
    for (int64_t max_steps : {int64_t{-1}, int64_t{2}, int64_t{1000}}) {
      const std::vector<int64_t> lengths = lengths_of(40);
      EpochPlans plans(lengths, plan_options(shuffle), 5, max_steps);
      int64_t total = 0;
      for (int64_t e = 0; e < 5; ++e) {
        std::vector<StepPlan> expected = plan_epoch(lengths, e, plan_options(shuffle));
        if (max_steps > 0 && static_cast<int64_t>(expected.size()) > max_steps) expected.resize(max_steps);
        EXPECT_EQ(plans.steps_before(e), total);
        EXPECT_EQ(plans.steps_in_epoch(e), static_cast<int64_t>(expected.size()));
        ASSERT_EQ(plans.epoch(e).size(), expected.size());
        for (size_t s = 0; s < expected.size(); ++s)
          for (size_t m = 0; m < expected[s].micro_batches.size(); ++m)
            EXPECT_EQ(plans.epoch(e)[s].micro_batches[m].samples, expected[s].micro_batches[m].samples);
        total += static_cast<int64_t>(expected.size());
      }
      EXPECT_EQ(plans.total_steps(), total) << "shuffle " << shuffle << " max_steps " << max_steps;
    }
}

// Ten million epochs capped at two steps each: counted from a packing bound, nothing planned beyond epoch 0.
TEST(EpochPlans, ManyEpochsWithMaxStepsAreCountedAtOnce) {
  const EpochPlans plans(lengths_of(40), plan_options(true), 10'000'000, 2);
  EXPECT_EQ(plans.total_steps(), 20'000'000);
  EXPECT_EQ(plans.steps_before(9'999'999), 19'999'998);
}

TEST_F(TrainReliabilityTest, OutputDirLockIsExclusiveAndNamesTheHolder) {
  const std::string dir = path("run/nested");
  {
    OutputDirLock lock(dir);
    const std::string text = read_file(lock.path());
    EXPECT_NE(text.find("pid " + std::to_string(::getpid())), std::string::npos) << text;
    try {
      OutputDirLock second(dir);  // another open file description: flock refuses it as it would another process
      FAIL() << "a second lock on the same directory was granted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("in use by another run"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("pid " + std::to_string(::getpid())), std::string::npos) << e.what();
    }
  }
  OutputDirLock again(dir);  // released with its holder
}

TEST_F(TrainReliabilityTest, StaleLockFileIsTakenOver) {
  std::filesystem::create_directories(path("run"));
  std::ofstream(path("run/.veomni.lock")) << "host elsewhere\npid 999999\n";
  OutputDirLock lock(path("run"));
  EXPECT_EQ(read_file(lock.path()).find("999999"), std::string::npos);
}

TEST_F(TrainReliabilityTest, OutputDirChecks) {
  std::ofstream(path("file")) << "x";
  EXPECT_THROW(OutputDirLock(path("file")), InputError);
  EXPECT_THROW(OutputDirLock(path("file/below")), InputError);
  EXPECT_THROW(OutputDirLock(path(std::string(300, 'a'))), InputError);
  std::string deep = path("d");
  while (deep.size() < 4100) deep += "/" + std::string(200, 'b');
  EXPECT_THROW(OutputDirLock{deep}, InputError);
  try {
    OutputDirLock lock(path("file/below"));
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("which is a file"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("train.checkpoint.output_dir"), std::string::npos) << e.what();
  }
}

TEST(StopSignal, RecordsTheFirstSignal) {
  install_stop_signal_handlers();
  EXPECT_EQ(stop_signal_received(), 0);
  std::raise(SIGTERM);
  EXPECT_EQ(stop_signal_received(), SIGTERM);
  EXPECT_STREQ(stop_signal_name(SIGTERM), "SIGTERM");
  std::signal(SIGTERM, SIG_DFL);  // the recorded signal stays; later tests get the default action back
  std::signal(SIGINT, SIG_DFL);
}

TEST_F(TrainReliabilityTest, DataCoverageCountsTruncationAndLabels) {
  write_labelled(path("d.h5"), {10, 100, 1, 70}, false);
  const DatasetReader data(path("d.h5"));
  const DataCoverage c = measure_data_coverage(data, {0, 1, 2, 3}, 64);
  EXPECT_EQ(c.truncated_samples, 2);
  EXPECT_EQ(c.truncated_tokens, 36 + 6);
  EXPECT_EQ(c.tokens, 181);
  EXPECT_EQ(c.samples_without_label, 1);  // the one-token sample: its only token is never a target
  EXPECT_EQ(c.label_tokens, 9 + 63 + 0 + 63);
  EXPECT_NO_THROW(report_data_coverage(c, path("d.h5"), 64));
}

TEST_F(TrainReliabilityTest, DataWithoutLabelTokenIsRefused) {
  write_labelled(path("masked.h5"), {10, 20}, true);
  const DatasetReader masked(path("masked.h5"));
  const DataCoverage c = measure_data_coverage(masked, {0, 1}, 64);
  EXPECT_EQ(c.samples_without_label, 2);
  try {
    report_data_coverage(c, path("masked.h5"), 64);
    FAIL() << "no label token accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("masked.h5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'labels'"), std::string::npos) << e.what();
  }
  write_labelled(path("ok.h5"), {10, 20}, false);
  const DatasetReader ok(path("ok.h5"));
  EXPECT_THROW(report_data_coverage(measure_data_coverage(ok, {0, 1}, 1), path("ok.h5"), 1), InputError);
}

TEST(HfLoader, NonFiniteWeightIsRefusedNamingTheTensor) {
  Tensor w = Tensor::full<float>({2, 3}, 0.5f);
  w.data<float>()[4] = std::numeric_limits<float>::quiet_NaN();
  const TensorMapSource source({{"model.norm.weight", w}}, "weights.safetensors");
  Parameter p;
  p.name = "model.norm.weight";
  p.shape = {2, 3};
  try {
    read_hf_parameter(source, p, DType::F32);
    FAIL() << "NaN weight accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("weights.safetensors: tensor 'model.norm.weight'"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("non-finite"), std::string::npos) << e.what();
  }
}

// bf16 and f16 weights are checked on their bits: an exponent of all ones (Inf of either sign, NaN) is refused with
// the count and the first index, the largest finite values pass.
TEST(HfLoader, NonFiniteHalfWeightsAreCountedOnTheirBits) {
  struct Case {
    DType dtype;
    std::vector<uint16_t> finite, bad;  // bits
  };
  for (const Case& c : {Case{DType::BF16, {0x7f7f, 0xff7f, 0x0001, 0x3f80}, {0x7f80, 0xff80, 0x7fc0}},
                        Case{DType::F16, {0x7bff, 0xfbff, 0x0001, 0x3c00}, {0x7c00, 0xfc00, 0x7e00}}}) {
    SCOPED_TRACE(dtype_name(c.dtype));
    Parameter p;
    p.name = "model.norm.weight";
    p.shape = {8};
    const auto load = [&](const std::vector<uint16_t>& bits) {
      Tensor w = Tensor::empty({8}, c.dtype);
      for (int64_t i = 0; i < 8; ++i)
        std::memcpy(static_cast<uint16_t*>(w.raw_data()) + i, &bits[static_cast<size_t>(i) % bits.size()], 2);
      return read_hf_parameter(TensorMapSource({{p.name, w}}, "weights.safetensors"), p, DType::F32);
    };
    EXPECT_NO_THROW(load(c.finite));
    // +Inf at flat index 3, -Inf at 6, NaN at 7.
    const std::vector<uint16_t> mixed = {c.finite[0], c.finite[1], c.finite[2], c.bad[0],
                                         c.finite[3], c.finite[0], c.bad[1],   c.bad[2]};
    try {
      load(mixed);
      FAIL() << "non-finite weights accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("holds 3 non-finite value(s), the first (inf) at flat index 3"),
                std::string::npos)
          << e.what();
    }
  }
}
