// Per-step training metrics in VeOmni's log_dict.json form: {"loss": [...], "grad_norm": [...], ...}.
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

// Ordered metric series of equal length, one entry per step. Keys keep the order of their first append.
class MetricsLog {
 public:
  MetricsLog() = default;
  // Series must all have the same length and distinct keys (VEOMNI_CHECK otherwise).
  explicit MetricsLog(std::vector<MetricSeries> series, std::string source = "");

  // Adds one step. The first call fixes the key set; later calls must give exactly the same keys (any order).
  void append(const std::vector<std::pair<std::string, double>>& step_values);
  // Keeps the first num_steps steps (a resumed run restarts its log at the checkpoint's step).
  void truncate(size_t num_steps);

  size_t num_steps() const;
  std::vector<std::string> keys() const;
  const std::vector<MetricSeries>& series() const { return series_; }
  bool contains(const std::string& key) const;
  // The series of key; InputError naming the source file and the keys it has when absent.
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
  std::string source_;
};

// <dir>/log_dict.json when path_or_run_dir is a directory, else the path itself.
std::string metrics_log_path(const std::string& path_or_run_dir);

// Loads and validates a log_dict.json (or a run directory holding one): an object whose values are arrays of
// finite numbers, all of the same length. Throws InputError naming the file, and the key and index when an entry
// is wrong (NaN, Infinity, null, a string, ...).
MetricsLog load_metrics(const std::string& path_or_run_dir);

}  // namespace veomni
