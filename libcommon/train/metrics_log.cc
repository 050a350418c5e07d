// MetricsLog: append per-step values, write log_dict.json exactly, load and validate it.
#include "train/metrics_log.h"

#include <spdlog/fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "train/metrics_journal.h"

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

bool is_eval_metric(const std::string& key) { return key.rfind("eval_", 0) == 0; }

std::string metric_json_number(double value) { return format_metric(value); }

namespace {

// eval_step: whole, increasing step numbers within the logged steps.
void check_eval_steps(const std::vector<double>& steps, size_t num_steps, const std::string& source) {
  for (size_t i = 0; i < steps.size(); ++i) {
    const double step = steps[i];
    VEOMNI_INPUT_CHECK(step == std::floor(step) && step >= 1 && step <= static_cast<double>(num_steps) &&
                           (i == 0 || step > steps[i - 1]),
                       "{}: key '{}' index {} is {}: expected increasing optimizer steps within the {} logged steps",
                       source, kEvalStepKey, i, step, num_steps);
  }
}

}  // namespace

MetricsLog::MetricsLog(std::vector<MetricSeries> series, std::string source) : source_(std::move(source)) {
  const std::string where = source_.empty() ? "metrics log" : source_;
  std::set<std::string> seen;
  for (MetricSeries& s : series) {
    VEOMNI_INPUT_CHECK(seen.insert(s.key).second, "{}: metric '{}' appears twice", where, s.key);
    (is_eval_metric(s.key) ? eval_ : series_).push_back(std::move(s));
  }
  for (const MetricSeries& s : series_)
    VEOMNI_INPUT_CHECK(s.values.size() == series_.front().values.size(),
                       "{}: key '{}' has {} steps but '{}' has {}: every metric needs one entry per step", where,
                       s.key, s.values.size(), series_.front().key, series_.front().values.size());
  if (eval_.empty()) return;
  const auto step = std::find_if(eval_.begin(), eval_.end(), [](const MetricSeries& s) { return s.key == kEvalStepKey; });
  VEOMNI_INPUT_CHECK(step != eval_.end(), "{}: eval metrics ({}) without '{}', the steps they were measured at",
                     where, eval_.front().key, kEvalStepKey);
  std::rotate(eval_.begin(), step, step + 1);  // eval_step first
  check_eval_steps(eval_.front().values, num_steps(), where);
  for (const MetricSeries& s : eval_)
    VEOMNI_INPUT_CHECK(s.values.size() == eval_.front().values.size(),
                       "{}: key '{}' has {} entries but '{}' has {}: every eval metric needs one entry per evaluation",
                       where, s.key, s.values.size(), kEvalStepKey, eval_.front().values.size());
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

void MetricsLog::append_eval(int64_t step, const std::vector<std::pair<std::string, double>>& eval_values) {
  VEOMNI_CHECK(step >= 1 && static_cast<size_t>(step) <= num_steps() &&
                   (eval_.empty() || eval_.front().values.empty() || static_cast<double>(step) > eval_.front().values.back()),
               "evaluation after step {}: {} steps logged, the last evaluation after step {}", step, num_steps(),
               eval_.empty() || eval_.front().values.empty() ? 0.0 : eval_.front().values.back());
  if (eval_.empty()) {
    eval_.push_back({kEvalStepKey, {}});
    for (const auto& [key, value] : eval_values) {
      VEOMNI_CHECK(is_eval_metric(key) && key != kEvalStepKey && !find(key), "eval metric '{}'", key);
      eval_.push_back({key, {}});
    }
  }
  VEOMNI_CHECK(eval_values.size() + 1 == eval_.size(), "evaluation after step {} logs {} metrics, earlier ones {}", step,
               eval_values.size(), eval_.size() - 1);
  for (const auto& [key, value] : eval_values)
    VEOMNI_CHECK(find(key) != nullptr && is_eval_metric(key), "evaluation after step {} logs '{}', earlier ones did not",
                 step, key);
  eval_.front().values.push_back(static_cast<double>(step));
  for (const auto& [key, value] : eval_values) find(key)->values.push_back(value);
}

void MetricsLog::truncate(size_t num_steps_to_keep) {
  for (MetricSeries& s : series_)
    if (s.values.size() > num_steps_to_keep) s.values.resize(num_steps_to_keep);
  if (eval_.empty()) return;
  const std::vector<double>& steps = eval_.front().values;
  const auto kept = static_cast<size_t>(
      std::upper_bound(steps.begin(), steps.end(), static_cast<double>(num_steps_to_keep)) - steps.begin());
  for (MetricSeries& s : eval_) s.values.resize(kept);
}

size_t MetricsLog::num_steps() const { return series_.empty() ? 0 : series_.front().values.size(); }

size_t MetricsLog::num_evals() const { return eval_.empty() ? 0 : eval_.front().values.size(); }

std::vector<std::string> MetricsLog::keys() const {
  std::vector<std::string> out;
  for (const MetricSeries& s : series_) out.push_back(s.key);
  for (const MetricSeries& s : eval_) out.push_back(s.key);
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
  for (const MetricSeries& s : is_eval_metric(key) ? eval_ : series_)
    if (s.key == key) return &s;
  return nullptr;
}

MetricSeries* MetricsLog::find(const std::string& key) {
  return const_cast<MetricSeries*>(std::as_const(*this).find(key));
}

std::string MetricsLog::to_json() const {
  std::string out = "{";
  bool first = true;
  for (const std::vector<MetricSeries>* group : {&series_, &eval_})
    for (const MetricSeries& s : *group) {
      out += fmt::format("{}\n  {}: [", first ? "" : ",", nlohmann::json(s.key).dump());
      first = false;
      for (size_t i = 0; i < s.values.size(); ++i) {
        if (i > 0) out += ", ";
        // Steps are whole numbers and read as such.
        out += s.key == kEvalStepKey ? fmt::format("{}", static_cast<int64_t>(s.values[i])) : format_metric(s.values[i]);
      }
      out += "]";
    }
  out += first ? "}\n" : "\n}\n";
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
  const bool journal_only = !std::filesystem::exists(path, ec) && std::filesystem::exists(metrics_journal_path(path), ec);
  VEOMNI_INPUT_CHECK(journal_only || std::filesystem::exists(path, ec), "metrics log '{}' does not exist{}", path,
                     path == path_or_run_dir ? "" : " (expected in the run directory)");
  std::vector<MetricSeries> series;
  if (!journal_only) {
    const nlohmann::ordered_json root = read_ordered_json_file(path, NonFiniteTokens::AsStrings);
    VEOMNI_INPUT_CHECK(root.is_object(), "{}: expected an object of metric arrays like {{\"loss\": [...]}}, found {}",
                       path, root.type_name());
    for (const auto& [key, array] : root.items()) series.push_back(parse_series(path, key, array));
  }
  MetricsLog log(std::move(series), path);
  fold_metrics_journal(log, path);
  return log;
}

}  // namespace veomni
