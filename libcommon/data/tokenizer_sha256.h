// SHA-256 of a byte string (FIPS 180-4), to identify a tokenizer file by its content in dataset headers.
#pragma once
#include <string>
#include <string_view>

namespace veomni {

// Lower-case hex digest, as sha256sum prints it.
std::string sha256_hex(std::string_view bytes);

}  // namespace veomni
