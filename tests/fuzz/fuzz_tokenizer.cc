// Fuzz target: a tokenizer.json loaded and used to encode and decode a fixed text with added tokens.
#include "data/tokenizer.h"
#include "fuzz_util.h"
#include "io/json_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  veomni::fuzz::scratch_dir();
  veomni::fuzz::expect_input_errors_only([&] {
    const nlohmann::json json = veomni::parse_json(veomni::fuzz::as_text(data, size), "tokenizer.json");
    const veomni::Tokenizer tokenizer = veomni::Tokenizer::from_json(json, "tokenizer.json");
    const std::vector<int32_t> ids = tokenizer.encode("<|im_start|>user\nHello wörld 123!<|im_end|>\n  x");
    (void)tokenizer.decode(ids, true);
  });
  return 0;
}
