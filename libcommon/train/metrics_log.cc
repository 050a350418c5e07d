// MetricsLog: append per-step values, write log_dict.json exactly, load and validate it.
#include "train/metrics_log.h"

#include <spdlog/fmt/ranges.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json_file.h"

namespace veomni {

namespace {

// Shortest text that reads back to the same double (what Python's repr gives), with ".0" kept on whole numbers so
// the values look like the floats they are. Non-finite values use Python's json spellings.
std::string format_metric(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".eE") == std::string::npos) text += ".0";
  return text;
}

std::string describe_entry(const nlohmann::ordered_json& entry) {
  if (entry.is_null()) return "null";
  if (entry.is_string()) {
    const auto& s = entry.get_ref<const std::string&>();
    if (s == "NaN" || s == "Infinity" || s == "-Infinity") return s;
    return fmt::format("the string \"{}\"", s);
  }
  return fmt::format("{} {}", entry.type_name(), entry.dump());
}

MetricSeries parse_series(const std::string& path, const std::string& key, const nlohmann::ordered_json& array) {
  VEOMNI_INPUT_CHECK(array.is_array(), "{}: key '{}' is {}, expected an array with one number per step", path, key,
                     array.type_name());
  MetricSeries series{key, {}};
  series.values.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    const auto& entry = array[i];
    VEOMNI_INPUT_CHECK(entry.is_number(), "{}: key '{}' index {} is {}, expected a finite number", path, key, i,
                       describe_entry(entry));
    series.values.push_back(entry.get<double>());
  }
  return series;
}

}  // namespace

MetricsLog::MetricsLog(std::vector<MetricSeries> series, std::string source)
    : series_(std::move(series)), source_(std::move(source)) {
  std::set<std::string> seen;
  for (const MetricSeries& s : series_) {
    VEOMNI_CHECK(seen.insert(s.key).second, "metric '{}' appears twice", s.key);
    VEOMNI_CHECK(s.values.size() == series_.front().values.size(), "metric '{}' has {} steps, '{}' has {}", s.key,
                 s.values.size(), series_.front().key, series_.front().values.size());
  }
}

void MetricsLog::append(const std::vector<std::pair<std::string, double>>& step_values) {
  if (series_.empty() || num_steps() == 0) {
    std::vector<MetricSeries> fresh;
    for (const auto& [key, value] : step_values) fresh.push_back({key, {value}});
    *this = MetricsLog(std::move(fresh), source_);
    return;
  }
  VEOMNI_CHECK(step_values.size() == series_.size(), "step {} logs {} metrics, earlier steps logged {} ({})",
               num_steps() + 1, step_values.size(), series_.size(), fmt::join(keys(), ", "));
  // Validate the whole step before touching any series, so a rejected step leaves the log as it was.
  const size_t step = num_steps();
  std::set<std::string> given;
  for (const auto& [key, value] : step_values) {
    VEOMNI_CHECK(contains(key), "step {} logs '{}', which earlier steps did not ({})", step + 1, key,
                 fmt::join(keys(), ", "));
    VEOMNI_CHECK(given.insert(key).second, "step {} logs '{}' twice", step + 1, key);
  }
  for (const auto& [key, value] : step_values) find(key)->values.push_back(value);
}

void MetricsLog::truncate(size_t num_steps_to_keep) {
  for (MetricSeries& s : series_)
    if (s.values.size() > num_steps_to_keep) s.values.resize(num_steps_to_keep);
}

size_t MetricsLog::num_steps() const { return series_.empty() ? 0 : series_.front().values.size(); }

std::vector<std::string> MetricsLog::keys() const {
  std::vector<std::string> out;
  for (const MetricSeries& s : series_) out.push_back(s.key);
  return out;
}

bool MetricsLog::contains(const std::string& key) const { return find(key) != nullptr; }

const std::vector<double>& MetricsLog::values(const std::string& key) const {
  const MetricSeries* s = find(key);
  VEOMNI_INPUT_CHECK(s != nullptr, "{}: no metric '{}' (it has: {})", source_.empty() ? "metrics log" : source_, key,
                     fmt::join(keys(), ", "));
  return s->values;
}

const MetricSeries* MetricsLog::find(const std::string& key) const {
  for (const MetricSeries& s : series_)
    if (s.key == key) return &s;
  return nullptr;
}

MetricSeries* MetricsLog::find(const std::string& key) {
  return const_cast<MetricSeries*>(std::as_const(*this).find(key));
}

std::string MetricsLog::to_json() const {
  std::string out = "{";
  for (size_t k = 0; k < series_.size(); ++k) {
    out += fmt::format("{}\n  {}: [", k == 0 ? "" : ",", nlohmann::json(series_[k].key).dump());
    for (size_t i = 0; i < series_[k].values.size(); ++i) {
      if (i > 0) out += ", ";
      out += format_metric(series_[k].values[i]);
    }
    out += "]";
  }
  out += series_.empty() ? "}\n" : "\n}\n";
  return out;
}

void MetricsLog::write(const std::string& path) const { write_file_atomic(path, to_json()); }

std::string metrics_log_path(const std::string& path_or_run_dir) {
  std::error_code ec;
  if (std::filesystem::is_directory(path_or_run_dir, ec))
    return (std::filesystem::path(path_or_run_dir) / "log_dict.json").string();
  return path_or_run_dir;
}

MetricsLog load_metrics(const std::string& path_or_run_dir) {
  const std::string path = metrics_log_path(path_or_run_dir);
  std::error_code ec;
  VEOMNI_INPUT_CHECK(std::filesystem::exists(path, ec), "metrics log '{}' does not exist{}", path,
                     path == path_or_run_dir ? "" : " (expected in the run directory)");
  const nlohmann::ordered_json root = read_ordered_json_file(path, NonFiniteTokens::AsStrings);
  VEOMNI_INPUT_CHECK(root.is_object(), "{}: expected an object of metric arrays like {{\"loss\": [...]}}, found {}",
                     path, root.type_name());
  std::vector<MetricSeries> series;
  for (const auto& [key, array] : root.items()) {
    series.push_back(parse_series(path, key, array));
    const MetricSeries& first = series.front();
    VEOMNI_INPUT_CHECK(series.back().values.size() == first.values.size(),
                       "{}: key '{}' has {} steps but '{}' has {}: every metric needs one entry per step", path, key,
                       series.back().values.size(), first.key, first.values.size());
  }
  return MetricsLog(std::move(series), path);
}

}  // namespace veomni
