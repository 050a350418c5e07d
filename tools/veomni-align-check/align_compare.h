// Compares the metric series of several runs against the first one, step by step, within rtol/atol.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "train/metrics_log.h"

namespace veomni {

struct AlignOptions {
  double rtol = 0.01;
  double atol = 0.01;
  std::optional<size_t> steps;    // compare only the first N steps
  std::vector<std::string> keys;  // empty: every key present in all runs but timing and resource keys
};

struct NamedRun {
  std::string name;  // as given on the command line
  MetricsLog log;
};

// The step of one (key, run) pair that comes closest to (or goes furthest beyond) the tolerance
// |value - baseline| <= atol + rtol * |baseline|.
struct KeyRunComparison {
  std::string key;
  std::string run;
  size_t worst_step = 0;  // 0-based index into the series; the report prints it 1-based
  double baseline = 0;
  double value = 0;
  double abs_diff = 0;
  double rel_diff = 0;  // abs_diff / |baseline|; infinite when the baseline is 0 and the values differ
  size_t failing_steps = 0;
  bool pass = true;
};

struct AlignReport {
  std::string baseline;
  std::vector<std::string> runs;  // the compared runs, baseline excluded
  std::vector<std::string> keys;
  size_t steps = 0;
  double rtol = 0;
  double atol = 0;
  std::vector<KeyRunComparison> comparisons;  // per key, then per run
  bool aligned = true;
};

// Metrics of speed or resources rather than numerics (step_time, data_time, tokens_per_sec, mfu, memory, ...): runs
// that compute the same values differ there, so the default key set leaves them out.
bool is_timing_or_resource_key(const std::string& key);

// Throws InputError (naming the run file and key) for fewer than two runs, a requested key missing from a run, no
// key common to all runs, runs without steps, or runs whose step counts differ (without --steps) or fall short of
// --steps.
AlignReport compare_runs(const std::vector<NamedRun>& runs, const AlignOptions& options);

}  // namespace veomni
