// Key selection, step-count checks and the worst-step search behind veomni-align-check.
#include "align_compare.h"

#include <spdlog/fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "core/error.h"

namespace veomni {

namespace {

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

std::vector<std::string> keys_in_every_run(const std::vector<NamedRun>& runs) {
  std::vector<std::string> keys;
  std::vector<std::string> skipped;
  for (const std::string& key : runs.front().log.keys()) {
    bool everywhere = true;
    for (const NamedRun& run : runs) everywhere = everywhere && run.log.contains(key);
    if (!everywhere) continue;
    (is_timing_or_resource_key(key) ? skipped : keys).push_back(key);
  }
  if (keys.empty() && !skipped.empty())
    throw InputError(fmt::format("the metrics common to all runs measure time or resources only ({}), which are "
                                 "not compared by default (hint: name them with --keys)",
                                 fmt::join(skipped, ", ")));
  if (keys.empty()) {
    std::string listing;
    for (const NamedRun& run : runs)
      listing += fmt::format("\n  {}: {}", run.log.source(), fmt::join(run.log.keys(), ", "));
    throw InputError(fmt::format("no metric is present in every run:{}", listing));
  }
  return keys;
}

std::vector<std::string> select_keys(const std::vector<NamedRun>& runs, const AlignOptions& options) {
  if (options.keys.empty()) return keys_in_every_run(runs);
  for (const std::string& key : options.keys)
    for (const NamedRun& run : runs)
      VEOMNI_INPUT_CHECK(run.log.contains(key), "{}: no metric '{}' (it has: {})", run.log.source(), key,
                         fmt::join(run.log.keys(), ", "));
  return options.keys;
}

size_t select_steps(const std::vector<NamedRun>& runs, const AlignOptions& options) {
  const MetricsLog& base = runs.front().log;
  for (const NamedRun& run : runs) {
    VEOMNI_INPUT_CHECK(run.log.num_steps() > 0, "{}: no steps logged", run.log.source());
    if (options.steps) {
      VEOMNI_INPUT_CHECK(run.log.num_steps() >= *options.steps, "{}: has {} steps, fewer than --steps {}",
                         run.log.source(), run.log.num_steps(), *options.steps);
    } else {
      VEOMNI_INPUT_CHECK(run.log.num_steps() == base.num_steps(),
                         "{}: has {} steps but the baseline {} has {} (use --steps N to compare the first N)",
                         run.log.source(), run.log.num_steps(), base.source(), base.num_steps());
    }
  }
  return options.steps ? *options.steps : base.num_steps();
}

// Eval metrics (eval_*) have one entry per evaluation: those after the compared steps' evaluations, which every run
// must have made after the same steps.
// "2, 4, 6": the first n evaluation steps (whole numbers, printed as integers).
std::string eval_steps_text(const std::vector<double>& at, size_t n) {
  std::vector<int64_t> steps;
  for (size_t i = 0; i < n && i < at.size(); ++i) steps.push_back(static_cast<int64_t>(at[i]));
  return fmt::format("{}", fmt::join(steps, ", "));
}

size_t evals_to_compare(const std::vector<NamedRun>& runs, size_t steps) {
  const std::vector<double>& base = runs.front().log.values(kEvalStepKey);
  const auto count = [steps](const std::vector<double>& at) {
    return static_cast<size_t>(std::upper_bound(at.begin(), at.end(), static_cast<double>(steps)) - at.begin());
  };
  const size_t evals = count(base);
  for (const NamedRun& run : runs) {
    const std::vector<double>& at = run.log.values(kEvalStepKey);
    VEOMNI_INPUT_CHECK(count(at) == evals && std::equal(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(evals), at.begin()),
                       "{}: evaluated after steps [{}], the baseline {} after [{}] (hint: the same train.eval_steps, "
                       "or compare the per-step metrics with --keys)",
                       run.log.source(), eval_steps_text(at, count(at)), runs.front().log.source(),
                       eval_steps_text(base, evals));
  }
  return evals;
}

// How far a difference is into its tolerance: <= 1 passes. A zero tolerance makes any difference infinite.
double tolerance_ratio(double abs_diff, double tolerance) {
  if (tolerance > 0) return abs_diff / tolerance;
  return abs_diff > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

KeyRunComparison compare_series(const std::string& key, const NamedRun& run, const std::vector<double>& base,
                                const std::vector<double>& values, size_t steps, const AlignOptions& options) {
  KeyRunComparison result{key, run.name};
  double worst_ratio = -1;
  for (size_t i = 0; i < steps; ++i) {
    const double abs_diff = std::fabs(values[i] - base[i]);
    const double tolerance = options.atol + options.rtol * std::fabs(base[i]);
    const double ratio = tolerance_ratio(abs_diff, tolerance);
    if (abs_diff > tolerance) ++result.failing_steps;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      result.worst_step = i;
      result.baseline = base[i];
      result.value = values[i];
      result.abs_diff = abs_diff;
    }
  }
  if (result.baseline != 0)
    result.rel_diff = result.abs_diff / std::fabs(result.baseline);
  else
    result.rel_diff = result.abs_diff > 0 ? std::numeric_limits<double>::infinity() : 0.0;
  result.pass = result.failing_steps == 0;
  return result;
}

}  // namespace

bool is_timing_or_resource_key(const std::string& key) {
  static const char* const kParts[] = {"time", "per_sec", "per_second", "mfu", "memory", "mem_", "throughput",
                                       "elapsed", "seconds", "flops"};
  for (const char* part : kParts)
    if (contains(key, part)) return true;
  return key == "tokens_per_sec" || key == "tps";
}

AlignReport compare_runs(const std::vector<NamedRun>& runs, const AlignOptions& options) {
  VEOMNI_INPUT_CHECK(runs.size() >= 2, "need at least two runs to compare, got {}", runs.size());
  VEOMNI_INPUT_CHECK(options.rtol >= 0 && options.atol >= 0, "tolerances must be non-negative (rtol {}, atol {})",
                     options.rtol, options.atol);
  AlignReport report;
  report.baseline = runs.front().name;
  report.keys = select_keys(runs, options);
  report.steps = select_steps(runs, options);
  report.rtol = options.rtol;
  report.atol = options.atol;
  for (size_t r = 1; r < runs.size(); ++r) report.runs.push_back(runs[r].name);
  for (const std::string& key : report.keys) {
    const std::vector<double>& base = runs.front().log.values(key);
    const size_t entries = is_eval_metric(key) ? evals_to_compare(runs, report.steps) : report.steps;
    for (size_t r = 1; r < runs.size(); ++r) {
      report.comparisons.push_back(
          compare_series(key, runs[r], base, runs[r].log.values(key), entries, options));
      KeyRunComparison& added = report.comparisons.back();
      if (is_eval_metric(key) && entries > 0)  // report the step of the worst evaluation, not its index
        added.worst_step = static_cast<size_t>(runs.front().log.values(kEvalStepKey)[added.worst_step]) - 1;
      report.aligned = report.aligned && report.comparisons.back().pass;
    }
  }
  return report;
}

}  // namespace veomni
