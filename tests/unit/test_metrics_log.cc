// Unit tests of the metrics log (log_dict.json) and the file primitives under it: atomic writes, JSON reading.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "train/metrics_journal.h"
#include "train/metrics_log.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/expect_error.h"

using namespace veomni;
namespace fs = std::filesystem;

namespace {

class MetricsLogTest : public veomni::testing::ScratchDir {
 protected:
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name);
  }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs f, which must throw InputError whose message contains every fragment.
using veomni::testing::expect_input_error;

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

using AtomicFile = MetricsLogTest;
using JsonFile = MetricsLogTest;

}  // namespace

TEST_F(AtomicFile, CommitReplacesAndLeavesNoTemp) {
  const std::string target = path("out.txt");
  write("out.txt", "old");
  {
    AtomicFileWriter w(target);
    EXPECT_EQ(w.temp_path(), target + ".tmp-" + std::to_string(::getpid()));
    w << "new " << "content";
    w.write("!", 1);
    EXPECT_EQ(slurp(target), "old");  // untouched until commit
    w.commit();
    EXPECT_EQ(w.bytes_written(), 12u);
  }
  EXPECT_EQ(slurp(target), "new content!");
  EXPECT_FALSE(fs::exists(atomic_temp_path(target)));
}

TEST_F(AtomicFile, DestructorWithoutCommitRemovesTemp) {
  const std::string target = path("out.txt");
  {
    AtomicFileWriter w(target);
    w << "partial";
    EXPECT_TRUE(fs::exists(w.temp_path()));
  }
  EXPECT_FALSE(fs::exists(target));
  EXPECT_FALSE(fs::exists(atomic_temp_path(target)));
}

TEST_F(AtomicFile, HelperAndMissingDirectory) {
  write_file_atomic(path("a.bin"), std::string("x\0y", 3));
  EXPECT_EQ(slurp(path("a.bin")), std::string("x\0y", 3));
  expect_input_error([&] { write_file_atomic(path("no/such/dir/a.bin"), "x"); }, {path("no/such/dir/a.bin")});
}

TEST_F(JsonFile, ParseErrorNamesFileLineColumn) {
  const std::string p = write("bad.json", "{\n  \"a\": 1,\n  \"b\": ]\n}\n");
  expect_input_error([&] { read_json_file(p); }, {p + ":3:8: invalid JSON"});
  expect_input_error([&] { read_json_file(path("missing.json")); }, {path("missing.json")});
  expect_input_error([&] { read_json_file(dir_.string()); }, {"is a directory"});
}

TEST_F(JsonFile, NonFiniteTokensRejectedOrQuoted) {
  const std::string p = write("nan.json", "{\"NaNkey\": [NaN, -Infinity, Infinity, \"NaN in string\"]}");
  expect_input_error([&] { read_ordered_json_file(p); }, {p + ":1:13"});
  const auto j = read_ordered_json_file(p, NonFiniteTokens::AsStrings);
  EXPECT_EQ(j.dump(), R"({"NaNkey":["NaN","-Infinity","Infinity","NaN in string"]})");
}

TEST_F(JsonFile, NonFiniteTokenCutAtTheEndIsAParseError) {
  // A token's prefix at the very end ("-Infin") once made the quoting look past the end of the text (ASan).
  for (const char* text : {"[1, -Infin", "[1, Na", "[Infinit", "N"}) {
    const std::string p = write("cut.json", text);
    EXPECT_THROW(read_ordered_json_file(p, NonFiniteTokens::AsStrings), InputError) << text;
  }
}

TEST_F(JsonFile, WriteIsAtomicAndReadable) {
  write_json_file(path("x.json"), nlohmann::json{{"b", 1}, {"a", {1, 2}}});
  EXPECT_EQ(slurp(path("x.json")), "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": 1\n}\n");
  EXPECT_EQ(read_json_file(path("x.json"))["a"][1], 2);
}

TEST_F(MetricsLogTest, AppendKeepsKeyOrderAndWritesExactText) {
  MetricsLog log;
  log.append({{"loss", 1.5}, {"lr", 1e-4}, {"grad_norm", 3.0}});
  log.append({{"grad_norm", 2.25}, {"loss", 0.1}, {"lr", 1e-05}});  // any order after the first step
  EXPECT_EQ(log.num_steps(), 2u);
  EXPECT_EQ(log.keys(), (std::vector<std::string>{"loss", "lr", "grad_norm"}));
  EXPECT_EQ(log.to_json(), "{\n  \"loss\": [1.5, 0.1],\n  \"lr\": [0.0001, 1e-05],\n  \"grad_norm\": [3.0, 2.25]\n}\n");
}

TEST_F(MetricsLogTest, RoundTripIsBitExact) {
  const std::vector<double> awkward = {0.1,
                                       1.0 / 3.0,
                                       2.0 / 3.0 * 1e-300,
                                       std::numeric_limits<double>::denorm_min(),
                                       std::numeric_limits<double>::max(),
                                       -0.0,
                                       12345678901234567890.0,
                                       std::nextafter(1.0, 2.0),
                                       -7.0};
  MetricsLog log;
  for (size_t i = 0; i < awkward.size(); ++i)
    log.append({{"loss", awkward[i]}, {"foundation_loss", -awkward[i] / 7}, {"grad_norm", awkward[i] / 3}});
  log.write(path("log_dict.json"));
  const MetricsLog back = load_metrics(dir_.string());  // a run directory means <dir>/log_dict.json
  EXPECT_EQ(back.source(), path("log_dict.json"));
  ASSERT_EQ(back.keys(), log.keys());
  ASSERT_EQ(back.num_steps(), awkward.size());
  for (const std::string& key : log.keys())
    for (size_t i = 0; i < awkward.size(); ++i)
      EXPECT_TRUE(same_bits(back.values(key)[i], log.values(key)[i])) << key << "[" << i << "]";
}

TEST_F(MetricsLogTest, TruncateKeepsFirstSteps) {
  MetricsLog log;
  for (int i = 0; i < 5; ++i) log.append({{"loss", i * 1.0}, {"lr", 0.5}});
  log.truncate(2);
  EXPECT_EQ(log.num_steps(), 2u);
  EXPECT_EQ(log.values("loss"), (std::vector<double>{0.0, 1.0}));
}

TEST_F(MetricsLogTest, AppendWithDifferentKeysIsAnInternalError) {
  MetricsLog log;
  log.append({{"loss", 1.0}, {"lr", 0.5}});
  EXPECT_THROW(log.append({{"loss", 1.0}}), Error);
  EXPECT_THROW(log.append({{"loss", 1.0}, {"grad_norm", 0.5}}), Error);
  EXPECT_THROW(log.append({{"loss", 1.0}, {"loss", 0.5}}), Error);
  EXPECT_EQ(log.num_steps(), 1u);
}

TEST_F(MetricsLogTest, NonFiniteValuesAreWrittenLikePythonAndRejectedOnLoad) {
  MetricsLog log;
  log.append({{"loss", 1.0}, {"grad_norm", 2.0}});
  log.append({{"loss", std::nan("")}, {"grad_norm", -INFINITY}});
  EXPECT_EQ(log.to_json(), "{\n  \"loss\": [1.0, NaN],\n  \"grad_norm\": [2.0, -Infinity]\n}\n");
  log.write(path("log_dict.json"));
  expect_input_error([&] { load_metrics(path("log_dict.json")); },
                     {path("log_dict.json"), "key 'loss' index 1 is NaN"});
}

TEST_F(MetricsLogTest, InvalidFilesNameFileKeyAndIndex) {
  struct Case {
    std::string text;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {R"({"loss": [1.0, null]})", {"key 'loss' index 1 is null"}},
      {R"({"loss": [1.0, 2.0], "lr": [Infinity, 1]})", {"key 'lr' index 0 is Infinity"}},
      {R"({"loss": [1.0, "2.0"]})", {"key 'loss' index 1 is the string \"2.0\""}},
      {R"({"loss": [1.0, [2.0]]})", {"key 'loss' index 1 is array"}},
      {R"({"loss": [1.0, 2.0], "lr": [1.0]})", {"key 'lr' has 1 steps but 'loss' has 2"}},
      {R"({"loss": 1.0})", {"key 'loss' is number, expected an array"}},
      {R"([1.0, 2.0])", {"expected an object of metric arrays"}},
      {"{\"loss\": [1.0,\n 2.0,, 3.0]}", {":2:6: invalid JSON"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string p = write(fmt::format("case{}.json", i), cases[i].text);
    for (const std::string& fragment : cases[i].fragments)
      expect_input_error([&] { load_metrics(p); }, {p, fragment});
  }
  expect_input_error([&] { load_metrics(path("absent.json")); }, {path("absent.json"), "does not exist"});
  expect_input_error([&] { load_metrics(dir_.string()); }, {path("log_dict.json"), "run directory"});
}

TEST_F(MetricsLogTest, MissingKeyNamesSourceAndKeys) {
  write("log_dict.json", R"({"loss": [1.0], "lr": [0.1]})");
  const MetricsLog log = load_metrics(path("log_dict.json"));
  EXPECT_TRUE(log.contains("lr"));
  expect_input_error([&] { log.values("grad_norm"); }, {path("log_dict.json"), "'grad_norm'", "loss, lr"});
}

TEST_F(MetricsLogTest, EvalSeriesAreSparseBesideEvalStepAndRoundTrip) {
  MetricsLog log;
  for (int i = 1; i <= 4; ++i) {
    log.append({{"loss", i * 1.0}, {"lr", 0.5}});
    if (i % 2 == 0) log.append_eval(i, {{"eval_loss", 1.0 / i}, {"eval_foundation_loss", 2.0 / i}});
  }
  EXPECT_EQ(log.num_steps(), 4u);
  EXPECT_EQ(log.num_evals(), 2u);
  EXPECT_EQ(log.keys(), (std::vector<std::string>{"loss", "lr", "eval_step", "eval_loss", "eval_foundation_loss"}));
  EXPECT_EQ(log.to_json(),
            "{\n  \"loss\": [1.0, 2.0, 3.0, 4.0],\n  \"lr\": [0.5, 0.5, 0.5, 0.5],\n  \"eval_step\": [2, 4],\n"
            "  \"eval_loss\": [0.5, 0.25],\n  \"eval_foundation_loss\": [1.0, 0.5]\n}\n");
  log.write(path("log_dict.json"));
  const MetricsLog back = load_metrics(path("log_dict.json"));
  EXPECT_EQ(back.keys(), log.keys());
  EXPECT_EQ(back.values("eval_step"), (std::vector<double>{2, 4}));
  EXPECT_EQ(back.values("eval_loss"), (std::vector<double>{0.5, 0.25}));
  EXPECT_EQ(back.to_json(), log.to_json());
}

TEST_F(MetricsLogTest, TruncateDropsTheEvaluationsAfterTheKeptSteps) {
  MetricsLog log;
  for (int i = 1; i <= 5; ++i) {
    log.append({{"loss", i * 1.0}});
    if (i != 3) log.append_eval(i, {{"eval_loss", i * 10.0}});
  }
  log.truncate(3);
  EXPECT_EQ(log.values("eval_step"), (std::vector<double>{1, 2}));
  EXPECT_EQ(log.values("eval_loss"), (std::vector<double>{10.0, 20.0}));
  log.append({{"loss", 4.0}});
  log.append_eval(4, {{"eval_loss", 40.0}});
  EXPECT_EQ(log.values("eval_step"), (std::vector<double>{1, 2, 4}));
  // Not after a logged step, not after the last evaluation, other keys: internal errors.
  EXPECT_THROW(log.append_eval(5, {{"eval_loss", 1.0}}), Error);
  EXPECT_THROW(log.append_eval(4, {{"eval_loss", 1.0}}), Error);
  log.append({{"loss", 5.0}});
  EXPECT_THROW(log.append_eval(5, {{"eval_acc", 1.0}}), Error);
}

TEST_F(MetricsLogTest, InvalidEvalSeriesNameFileAndKey) {
  struct Case {
    std::string text;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {R"({"loss": [1.0, 2.0], "eval_loss": [1.0]})", "eval metrics (eval_loss) without 'eval_step'"},
      {R"({"loss": [1.0, 2.0], "eval_step": [1, 2], "eval_loss": [1.0]})", "key 'eval_loss' has 1 entries"},
      {R"({"loss": [1.0, 2.0], "eval_step": [2, 1], "eval_loss": [1.0, 2.0]})", "key 'eval_step' index 1 is 1"},
      {R"({"loss": [1.0, 2.0], "eval_step": [3], "eval_loss": [1.0]})", "key 'eval_step' index 0 is 3"},
      {R"({"loss": [1.0, 2.0], "eval_step": [1.5], "eval_loss": [1.0]})", "key 'eval_step' index 0 is 1.5"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string p = write(fmt::format("eval{}.json", i), cases[i].text);
    expect_input_error([&] { load_metrics(p); }, {p, cases[i].fragment});
  }
}

// --- the step journal beside log_dict.json ------------------------------------------------------------------

// A step costs an append to the journal, not a rewrite of the log; a reader still sees every step, bit for bit.
TEST_F(MetricsLogTest, JournalStepsBetweenRewritesAreFoldedIn) {
  const MetricsLogFile file(path("log_dict.json"));
  EXPECT_EQ(metrics_journal_path(file.path()), path("log_dict.steps.jsonl"));
  MetricsLog log;
  log.append({{"loss", 1.0 / 3.0}, {"lr", 1e-4}});
  file.write(log);
  const std::string rewritten = slurp(file.path());
  log.append({{"lr", 2e-4}, {"loss", 0.1}});
  file.append_last_step(log);
  log.append({{"loss", std::numeric_limits<double>::denorm_min()}, {"lr", -0.0}});
  file.append_last_step(log);
  EXPECT_EQ(slurp(file.path()), rewritten);  // the log itself was not rewritten
  const MetricsLog back = load_metrics(dir_.string());
  ASSERT_EQ(back.num_steps(), 3u);
  ASSERT_EQ(back.keys(), log.keys());
  for (const std::string& key : log.keys())
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(same_bits(back.values(key)[i], log.values(key)[i])) << key << i;
  // A rewrite folds the journal into the log and removes it.
  file.write(log);
  EXPECT_FALSE(fs::exists(path("log_dict.steps.jsonl")));
  EXPECT_EQ(load_metrics(dir_.string()).num_steps(), 3u);
}

// A crash after the first steps, before any rewrite, leaves only the journal; one between a rewrite and the
// journal's removal leaves steps in both (not counted twice); one mid-append leaves a line cut short (left out).
TEST_F(MetricsLogTest, JournalSurvivesCrashesAtEveryPoint) {
  const MetricsLogFile file(path("log_dict.json"));
  MetricsLog log;
  for (int i = 1; i <= 3; ++i) {
    log.append({{"loss", i * 0.5}, {"lr", 0.25}});
    file.append_last_step(log);
  }
  EXPECT_EQ(load_metrics(dir_.string()).values("loss"), (std::vector<double>{0.5, 1.0, 1.5}));
  log.write(file.path());  // rewritten; the journal not yet removed
  EXPECT_EQ(load_metrics(dir_.string()).values("loss"), (std::vector<double>{0.5, 1.0, 1.5}));
  std::ofstream(path("log_dict.steps.jsonl"), std::ios::app) << "{\"step\": 4, \"loss\": 2.0, \"lr\": 0.25}\n"
                                                             << "{\"step\": 5, \"loss\": 2.";
  EXPECT_EQ(load_metrics(dir_.string()).values("loss"), (std::vector<double>{0.5, 1.0, 1.5, 2.0}));
}

// Resuming drops the journal before rewriting the shorter log, so the interrupted run's later steps never return.
TEST_F(MetricsLogTest, RestartDropsTheJournalOfTheInterruptedRun) {
  const MetricsLogFile file(path("log_dict.json"));
  MetricsLog log;
  for (int i = 1; i <= 4; ++i) {
    log.append({{"loss", i * 1.0}});
    if (i == 1) file.write(log); else file.append_last_step(log);
  }
  log.truncate(2);  // the checkpoint's steps
  file.restart(log, true);
  EXPECT_FALSE(fs::exists(path("log_dict.steps.jsonl")));
  EXPECT_EQ(load_metrics(dir_.string()).values("loss"), (std::vector<double>{1.0, 2.0}));
  file.restart(MetricsLog(), false);  // a fresh run keeps the old log until its first write
  EXPECT_EQ(load_metrics(dir_.string()).num_steps(), 2u);
}

TEST_F(MetricsLogTest, BadJournalLinesNameTheJournalAndLine) {
  MetricsLog log;
  log.append({{"loss", 1.0}});
  log.write(path("log_dict.json"));
  write("log_dict.steps.jsonl", "{\"step\": 2, \"loss\": 2.0}\n{\"step\": 4, \"loss\": 3.0}\n");
  expect_input_error([&] { load_metrics(dir_.string()); },
                     {"log_dict.steps.jsonl line 2: step 4 follows step 2", "a step is missing"});
  write("log_dict.steps.jsonl", "{\"step\": 2, \"grad_norm\": 2.0}\n");
  expect_input_error([&] { load_metrics(dir_.string()); }, {"log_dict.steps.jsonl line 1: its metrics are not"});
  write("log_dict.steps.jsonl", "{\"step\": 2, \"loss\": NaN}\n");
  expect_input_error([&] { load_metrics(dir_.string()); }, {"line 1: key 'loss' is \"NaN\", expected a finite"});
}
