// veomni-align-check: are the metrics of several runs (log_dict.json) equal to the first run's within tolerance?
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "align_compare.h"
#include "align_report.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/tool.h"
#include "tools/cli.h"
#include "train/metrics_log.h"

namespace {

constexpr const char* kTool = "veomni-align-check";

struct Arguments {
  std::vector<std::string> runs;
  veomni::AlignOptions options;
  std::string keys;
  size_t steps = 0;
  bool json = false;
  std::string log_level = "warn";
};

void add_options(CLI::App& app, Arguments& args) {
  veomni::add_version_flag(app, kTool);
  app.add_option("runs", args.runs,
                 "Run directories holding log_dict.json, or log_dict.json files; the first is the baseline")
      ->required();
  // A plain string: a vector option would also swallow the run arguments that follow it.
  app.add_option("--keys", args.keys, "Comma-separated metrics to compare (default: every metric in all runs but timing and resource ones: *time*, *per_sec*, mfu, *memory*, ...)");
  // Tolerances are range-checked by compare_runs, whose message is clearer than CLI11's.
  app.add_option("--rtol", args.options.rtol, "Relative tolerance, >= 0 (default 0.01)");
  app.add_option("--atol", args.options.atol, "Absolute tolerance, >= 0 (default 0.01)");
  app.add_option("--steps", args.steps, "Compare only the first N steps")->check(veomni::integer_range(1, INT64_MAX));
  app.add_flag("--json", args.json, "Print the report as JSON instead of a table");
  app.add_option("--log-level", args.log_level, "trace, debug, info, warn, error, off (default warn)");
}

std::vector<std::string> split_keys(const std::string& csv) {
  std::vector<std::string> keys;
  if (csv.empty()) return keys;
  for (size_t begin = 0;;) {
    const size_t comma = csv.find(',', begin);
    keys.push_back(csv.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin));
    VEOMNI_INPUT_CHECK(!keys.back().empty(), "--keys '{}': empty metric name", csv);
    if (comma == std::string::npos) return keys;
    begin = comma + 1;
  }
}

int check_alignment(const Arguments& args) {
  std::vector<veomni::NamedRun> runs;
  for (const std::string& run : args.runs) runs.push_back({run, veomni::load_metrics(run)});
  veomni::AlignOptions options = args.options;
  if (args.steps > 0) options.steps = args.steps;
  options.keys = split_keys(args.keys);
  const veomni::AlignReport report = veomni::compare_runs(runs, options);
  const std::string text = args.json ? veomni::format_report_json(report) : veomni::format_report_table(report);
  std::fputs(text.c_str(), stdout);
  return report.aligned ? veomni::kExitOk : veomni::kExitCheckFailed;
}

}  // namespace

int main(int argc, char** argv) {
  return veomni::run_tool(kTool, [&]() -> int {
    CLI::App app{"Compare the per-step metrics (log_dict.json) of several runs against the first run.", kTool};
    Arguments args;
    add_options(app, args);
    if (const auto code = veomni::parse_command_line(app, argc, argv)) return *code;
    veomni::init_logging({.tool = kTool, .level = args.log_level});
    return check_alignment(args);
  });
}
