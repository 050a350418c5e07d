// Fuzz target: a HF config.json parsed into a model config and validated.
#include "fuzz_util.h"
#include "io/json_file.h"
#include "model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  veomni::fuzz::scratch_dir();
  veomni::fuzz::expect_input_errors_only([&] {
    const nlohmann::json json = veomni::parse_json(veomni::fuzz::as_text(data, size), "config.json");
    const veomni::ModelConfig config = veomni::model_config_from_json(json, "config.json");
    (void)veomni::model_config_to_json(config);
  });
  return 0;
}
