// The append-only step journal beside log_dict.json: writing, folding back, removing.
#include "train/metrics_journal.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/json_file.h"

namespace fs = std::filesystem;

namespace veomni {

namespace {

constexpr const char* kStepKey = "step";

// {"step": N, "<key>": value, ...} with the values written as log_dict.json writes them (bit-exact).
std::string journal_line(const MetricsLog& log) {
  const size_t last = log.num_steps() - 1;
  std::string line = fmt::format("{{\"{}\": {}", kStepKey, log.num_steps());
  for (const MetricSeries& s : log.series())
    line += fmt::format(", {}: {}", nlohmann::json(s.key).dump(), metric_json_number(s.values[last]));
  return line + "}\n";
}

void remove_journal(const std::string& journal) {
  std::error_code ec;
  fs::remove(journal, ec);
  if (ec) throw Error(fmt::format("{}: cannot remove the metrics journal: {}", journal, ec.message()));
}

// One journal line as (step, values); InputError naming the journal and the line when it is not one.
std::pair<int64_t, std::vector<std::pair<std::string, double>>> parse_line(const std::string& text,
                                                                           const std::string& where) {
  const nlohmann::ordered_json line = parse_ordered_json(text, where, NonFiniteTokens::AsStrings);
  VEOMNI_INPUT_CHECK(line.is_object() && line.contains(kStepKey) && line[kStepKey].is_number_integer(),
                     "{}: expected {{\"step\": N, \"<metric>\": value, ...}}", where);
  std::vector<std::pair<std::string, double>> values;
  for (const auto& [key, value] : line.items()) {
    if (key == kStepKey) continue;
    VEOMNI_INPUT_CHECK(value.is_number(), "{}: key '{}' is {}, expected a finite number", where, key, value.dump());
    values.emplace_back(key, value.get<double>());
  }
  return {line[kStepKey].get<int64_t>(), std::move(values)};
}

// The same keys as the log's per-step series (any order): a line of another run's log is refused.
bool same_keys(const MetricsLog& log, const std::vector<std::pair<std::string, double>>& values) {
  if (log.num_steps() == 0) return true;
  if (values.size() != log.series().size()) return false;
  for (const auto& [key, value] : values)
    if (is_eval_metric(key) || !log.contains(key)) return false;
  return true;
}

}  // namespace

std::string metrics_journal_path(const std::string& log_path) {
  return fs::path(log_path).replace_extension(".steps.jsonl").string();
}

MetricsLogFile::MetricsLogFile(std::string log_path)
    : path_(std::move(log_path)), journal_(metrics_journal_path(path_)) {}

void MetricsLogFile::append_last_step(const MetricsLog& log) const {
  VEOMNI_CHECK(log.num_steps() > 0, "appending a step of an empty metrics log to {}", journal_);
  std::ofstream out(journal_, std::ios::app | std::ios::binary);
  out << journal_line(log);
  out.flush();
  if (!out) throw Error(fmt::format("{}: cannot append step {} of the metrics log", journal_, log.num_steps()));
}

void MetricsLogFile::write(const MetricsLog& log) const {
  log.write(path_);
  remove_journal(journal_);
}

void MetricsLogFile::restart(const MetricsLog& log, bool resumed) const {
  remove_journal(journal_);
  if (resumed) log.write(path_);
}

void fold_metrics_journal(MetricsLog& log, const std::string& log_path) {
  const std::string journal = metrics_journal_path(log_path);
  std::ifstream in(journal, std::ios::binary);
  if (!in) return;
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  size_t begin = 0;
  for (int64_t number = 1; begin < text.size(); ++number) {
    const size_t end = text.find('\n', begin);
    if (end == std::string::npos) break;  // cut short by a crash mid-write
    const std::string where = fmt::format("{} line {}", journal, number);
    auto [step, values] = parse_line(text.substr(begin, end - begin), where);
    begin = end + 1;
    if (step <= static_cast<int64_t>(log.num_steps())) continue;
    VEOMNI_INPUT_CHECK(step == static_cast<int64_t>(log.num_steps()) + 1,
                       "{}: step {} follows step {} of {} (a step is missing)", where, step, log.num_steps(),
                       log_path);
    VEOMNI_INPUT_CHECK(same_keys(log, values), "{}: its metrics are not those of {}", where, log_path);
    log.append(values);
  }
}

}  // namespace veomni
