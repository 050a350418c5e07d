// Table and JSON renderings of veomni-align-check's report.
#include "align_report.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

namespace veomni {

namespace {

std::string format_rel_diff(double rel_diff) { return std::isinf(rel_diff) ? "inf" : fmt::format("{:.3e}", rel_diff); }

}  // namespace

std::string format_report_table(const AlignReport& report) {
  size_t key_width = 3, run_width = 3;
  for (const KeyRunComparison& c : report.comparisons) {
    key_width = std::max(key_width, c.key.size());
    run_width = std::max(run_width, c.run.size());
  }
  std::string out = fmt::format("baseline {}: {} step{} compared, pass when |x - base| <= {} + {} * |base|\n",
                                report.baseline, report.steps, report.steps == 1 ? "" : "s", report.atol, report.rtol);
  out += fmt::format("{:<{}}  {:<{}}  {:>6}  {:>15}  {:>15}  {:>10}  {:>10}  {}\n", "key", key_width, "run", run_width,
                     "step", "baseline", "value", "abs_diff", "rel_diff", "status");
  for (const KeyRunComparison& c : report.comparisons) {
    const std::string status =
        c.pass ? "pass" : fmt::format("FAIL ({} of {} steps)", c.failing_steps, report.steps);
    out += fmt::format("{:<{}}  {:<{}}  {:>6}  {:>15.9g}  {:>15.9g}  {:>10.3e}  {:>10}  {}\n", c.key, key_width, c.run,
                       run_width, c.worst_step + 1, c.baseline, c.value, c.abs_diff, format_rel_diff(c.rel_diff),
                       status);
  }
  out += report.aligned ? "aligned\n" : "NOT aligned\n";
  return out;
}

std::string format_report_json(const AlignReport& report) {
  nlohmann::ordered_json comparisons = nlohmann::ordered_json::array();
  for (const KeyRunComparison& c : report.comparisons) {
    const nlohmann::ordered_json rel_diff =
        std::isinf(c.rel_diff) ? nlohmann::ordered_json() : nlohmann::ordered_json(c.rel_diff);
    comparisons.push_back(nlohmann::ordered_json{{"key", c.key},
                           {"run", c.run},
                           {"worst_step", c.worst_step + 1},
                           {"baseline", c.baseline},
                           {"value", c.value},
                           {"abs_diff", c.abs_diff},
                           {"rel_diff", rel_diff},
                           {"failing_steps", c.failing_steps},
                           {"pass", c.pass}});
  }
  const nlohmann::ordered_json root = {{"baseline", report.baseline}, {"runs", report.runs},
                                       {"keys", report.keys},         {"steps", report.steps},
                                       {"rtol", report.rtol},         {"atol", report.atol},
                                       {"comparisons", comparisons},  {"aligned", report.aligned}};
  return root.dump(2) + "\n";
}

}  // namespace veomni
