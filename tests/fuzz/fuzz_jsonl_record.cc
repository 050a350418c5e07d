// Fuzz target: one JSONL line of veomni-preprocess text input encoded with the small seed tokenizer.
#include "data/text_preprocess_record.h"
#include "data/tokenizer.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  veomni::fuzz::scratch_dir();
  static const veomni::Tokenizer tokenizer = veomni::Tokenizer::from_file(VEOMNI_FUZZ_TOKENIZER_JSON);
  static const veomni::RecordEncoder encoders[] = {
      {tokenizer, veomni::RecordOptions{}},
      {tokenizer, veomni::RecordOptions{"content", "You are helpful.", 8, veomni::Truncation::Left}},
  };
  // encode_line promises never to throw: bad records come back as Bad.
  for (const veomni::RecordEncoder& encoder : encoders) (void)encoder.encode_line(veomni::fuzz::as_text(data, size));
  return 0;
}
