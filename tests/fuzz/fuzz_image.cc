// Fuzz target: PNG and JPEG bytes decoded to RGB by our media code (signature sniffing, libpng, libjpeg).
#include "fuzz_util.h"
#include "media/image_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  veomni::fuzz::scratch_dir();
  const std::vector<uint8_t> bytes(data, data + size);
  veomni::fuzz::expect_input_errors_only([&] { (void)veomni::decode_image_bytes(bytes, "fuzz image"); });
  return 0;
}
