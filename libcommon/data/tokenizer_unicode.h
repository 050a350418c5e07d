// UTF-8 validation and code-point helpers, and the NFC normaliser (utf8proc) that tokenizers apply to their input.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/utf8.h"

namespace veomni {


// Appends the UTF-8 encoding of code point cp (which must be a valid scalar value).
void append_utf8(std::string& out, char32_t cp);

// Decodes the code point starting at text[at] (valid UTF-8 assumed) and advances `at` past it.
char32_t next_code_point(std::string_view text, size_t& at);

// Unicode Normalization Form C of valid UTF-8 text, as HuggingFace tokenizers' "NFC" normaliser computes it.
std::string nfc_normalize(std::string_view text);

}  // namespace veomni
