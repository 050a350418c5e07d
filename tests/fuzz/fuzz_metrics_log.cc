// Fuzz target: a run's log_dict.json (Python's NaN/Infinity tokens allowed), as veomni-align-check and resume read it.
#include "fuzz_util.h"
#include "train/metrics_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = veomni::fuzz::write_scratch_file("log_dict.json", data, size);
  veomni::fuzz::expect_input_errors_only([&] {
    const veomni::MetricsLog log = veomni::load_metrics(path);
    (void)log.to_json();
  });
  return 0;
}
