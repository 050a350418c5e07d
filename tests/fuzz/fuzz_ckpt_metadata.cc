// Fuzz target: a checkpoint's metadata.json parsed and validated.
#include "ckpt/checkpoint_metadata.h"
#include "fuzz_util.h"
#include "io/json_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  veomni::fuzz::scratch_dir();
  veomni::fuzz::expect_input_errors_only([&] {
    const nlohmann::json json = veomni::parse_json(veomni::fuzz::as_text(data, size), "metadata.json");
    (void)veomni::checkpoint_metadata_from_json(json, "metadata.json");
  });
  return 0;
}
