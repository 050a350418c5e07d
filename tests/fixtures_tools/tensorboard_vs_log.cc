// Test support: checks a run's TensorBoard event files against its log_dict.json with veomni's own event reader.
//
// Usage: tensorboard_vs_log TENSORBOARD_DIR LOG_DICT [KEY...]
//   Every event file of the directory is read (CRCs checked); for a step logged in several files (a resumed run)
//   the newest file's value counts, as in TensorBoard. Each KEY (default: every key of the log but eval_step) must
//   have a scalar at every step 1..n of the log (an eval_* key: at each step of eval_step) equal to the float32 of
//   the log's double. Prints one line per file and a summary.
// Exit: 0 all equal, 1 a value is missing or differs, 2 an unreadable or corrupt file (the message names the file
// and the record's byte offset).
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tool.h"
#include "metrics/tensorboard_reader.h"
#include "train/metrics_log.h"

namespace {

int check_main(int argc, char** argv) {
  VEOMNI_INPUT_CHECK(argc >= 3, "usage: tensorboard_vs_log TENSORBOARD_DIR LOG_DICT [KEY...]");
  const veomni::MetricsLog log = veomni::load_metrics(argv[2]);
  std::vector<std::string> keys(argv + 3, argv + argc);
  if (keys.empty())
    for (const std::string& key : log.keys())
      if (key != veomni::kEvalStepKey) keys.push_back(key);
  std::map<std::pair<std::string, int64_t>, float> scalars;  // (tag, step) -> value of the newest file
  for (const std::string& path : veomni::list_tensorboard_event_files(argv[1])) {
    const veomni::TensorBoardEventFile file = veomni::read_tensorboard_event_file(path);
    VEOMNI_INPUT_CHECK(file.file_version == "brain.Event:2", "{}: file_version is '{}', expected brain.Event:2", path,
                       file.file_version);
    std::printf("%s: %zu scalars\n", path.c_str(), file.scalars.size());
    for (const veomni::TensorBoardScalar& s : file.scalars) scalars[{s.tag, s.step}] = s.value;
  }
  int failures = 0;
  for (const std::string& key : keys) {
    const std::vector<double>& values = log.values(key);
    const bool eval = veomni::is_eval_metric(key);
    for (size_t i = 0; i < values.size(); ++i) {
      const int64_t step = eval ? static_cast<int64_t>(log.values(veomni::kEvalStepKey)[i]) : static_cast<int64_t>(i) + 1;
      const auto it = scalars.find({key, step});
      if (it == scalars.end()) {
        std::printf("%s step %lld: no scalar in the event files\n", key.c_str(), static_cast<long long>(step));
        ++failures;
      } else if (!(it->second == static_cast<float>(values[i]))) {
        std::printf("%s step %lld: event %.9g, log_dict.json %.17g\n", key.c_str(), static_cast<long long>(step),
                    static_cast<double>(it->second), values[i]);
        ++failures;
      }
    }
  }
  if (failures > 0) return veomni::kExitCheckFailed;
  std::printf("agree: %zu keys x %zu steps\n", keys.size(), log.num_steps());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return veomni::run_tool("tensorboard_vs_log", [&] { return check_main(argc, argv); });
}
