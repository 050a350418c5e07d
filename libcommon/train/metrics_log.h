// Per-step training metrics in VeOmni's log_dict.json form: {"loss": [...], "grad_norm": [...], ...}, and the
// validation metrics of the steps that ran one: {"eval_step": [...], "eval_loss": [...], ...}.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace veomni {

// One metric over the steps: values[i] belongs to the (i+1)-th optimizer step.
struct MetricSeries {
  std::string key;
  std::vector<double> values;
};

// Validation metrics are sparse: the series "eval_step" holds the optimizer step after which each evaluation ran
// (increasing, within the logged steps) and every other series whose key starts with "eval_" one value per
// evaluation. Every other series has one value per step.
inline constexpr const char* kEvalStepKey = "eval_step";
bool is_eval_metric(const std::string& key);

// Ordered metric series: the per-step ones, of equal length, then the eval ones. Keys keep the order of their first
// append.
class MetricsLog {
 public:
  MetricsLog() = default;
  // Per-step series must all have the same length, eval series (eval_*) that of eval_step, and keys must be distinct;
  // InputError naming the source otherwise.
  explicit MetricsLog(std::vector<MetricSeries> series, std::string source = "");

  // Adds one step. The first call fixes the key set; later calls must give exactly the same keys (any order).
  void append(const std::vector<std::pair<std::string, double>>& step_values);
  // Adds one evaluation after optimizer step `step` (logged already, later than the last evaluation's); the values'
  // keys start with "eval_". The first call fixes the key set.
  void append_eval(int64_t step, const std::vector<std::pair<std::string, double>>& eval_values);
  // Keeps the first num_steps steps and the evaluations among them (a resumed run restarts its log at the
  // checkpoint's step).
  void truncate(size_t num_steps);

  size_t num_steps() const;
  size_t num_evals() const;
  // Every key: the per-step ones, then eval_step and the eval ones.
  std::vector<std::string> keys() const;
  // The per-step series.
  const std::vector<MetricSeries>& series() const { return series_; }
  // eval_step first, then the eval metrics (empty when no evaluation ran).
  const std::vector<MetricSeries>& eval_series() const { return eval_; }
  bool contains(const std::string& key) const;
  // The series of key (a per-step or an eval one); InputError naming the source file and the keys it has when absent.
  const std::vector<double>& values(const std::string& key) const;
  // Where it was loaded from ("" when built in memory); used in error messages.
  const std::string& source() const { return source_; }

  // log_dict.json text: keys in order, every double written so that it reads back bit-exactly. NaN and infinities
  // are written as Python's json module does (NaN, Infinity, -Infinity) so the log shows what happened; load_metrics
  // rejects them.
  std::string to_json() const;
  // Writes to_json() to path atomically.
  void write(const std::string& path) const;

 private:
  const MetricSeries* find(const std::string& key) const;
  MetricSeries* find(const std::string& key);

  std::vector<MetricSeries> series_;
  std::vector<MetricSeries> eval_;
  std::string source_;
};

// A metric value as log_dict.json writes it: the shortest text that reads back to the same double; NaN, Infinity,
// -Infinity as Python's json module writes them.
std::string metric_json_number(double value);

// <dir>/log_dict.json when path_or_run_dir is a directory, else the path itself.
std::string metrics_log_path(const std::string& path_or_run_dir);

// Loads and validates a log_dict.json (or a run directory holding one): an object whose values are arrays of
// finite numbers, the per-step ones all of the same length, the eval ones (eval_*) that of eval_step. Throws
// InputError naming the file, and the key and index when an entry is wrong (NaN, Infinity, null, a string, ...).
// The steps of its journal (train/metrics_journal.h) that follow are appended, so a run that stopped between two
// rewrites of its log still shows every step (the journal alone when the log was never written).
MetricsLog load_metrics(const std::string& path_or_run_dir);

}  // namespace veomni
