// Fuzz target: a veomni-train YAML config parsed against the schema and validated.
#include "fuzz_util.h"
#include "train/train_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  veomni::fuzz::scratch_dir();
  veomni::fuzz::expect_input_errors_only([&] {
    const veomni::TrainConfig config = veomni::train_config_from_yaml(veomni::fuzz::as_text(data, size), "fuzz.yaml");
    veomni::validate_train_config(config);
    (void)veomni::train_config_to_yaml(config);
  });
  return 0;
}
