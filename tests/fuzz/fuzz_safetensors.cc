// Fuzz target: a safetensors file (header length, JSON header, dtypes, offsets) opened and every tensor read.
#include "fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = veomni::fuzz::write_scratch_file("model.safetensors", data, size);
  veomni::fuzz::expect_input_errors_only([&] {
    const veomni::SafetensorsReader reader(path);
    for (const veomni::SafetensorsEntry& entry : reader.entries()) {
      (void)reader.read(entry.name);
      if (!entry.shape.empty() && entry.shape[0] > 0) (void)reader.read_rows(entry.name, 0, 1);
    }
  });
  return 0;
}
