// UTF-8 checks and NFC through utf8proc (Unicode's composition tables, kept current by its maintainers).
#include "data/tokenizer_unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/error.h"

namespace veomni {

namespace {

// Every code point below U+0300 is NFC in any context: none decomposes and none combines with a neighbour
// (the first combining marks are at U+0300). Such text skips utf8proc; in UTF-8 its bytes are all below 0xCC.
bool trivially_nfc(std::string_view text) {
  for (char c : text)
    if (static_cast<unsigned char>(c) >= 0xCC) return false;
  return true;
}

}  // namespace

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

char32_t next_code_point(std::string_view text, size_t& at) {
  const auto byte = [&](size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(text[k])); };
  const char32_t lead = byte(at);
  if (lead < 0x80) {
    at += 1;
    return lead;
  }
  if (lead < 0xE0) {
    const char32_t cp = ((lead & 0x1F) << 6) | (byte(at + 1) & 0x3F);
    at += 2;
    return cp;
  }
  if (lead < 0xF0) {
    const char32_t cp = ((lead & 0x0F) << 12) | ((byte(at + 1) & 0x3F) << 6) | (byte(at + 2) & 0x3F);
    at += 3;
    return cp;
  }
  const char32_t cp =
      ((lead & 0x07) << 18) | ((byte(at + 1) & 0x3F) << 12) | ((byte(at + 2) & 0x3F) << 6) | (byte(at + 3) & 0x3F);
  at += 4;
  return cp;
}

std::string nfc_normalize(std::string_view text) {
  if (trivially_nfc(text)) return std::string(text);
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &mapped, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(mapped, &std::free);
  if (n < 0) throw InputError(fmt::format("NFC normalisation failed: {}", utf8proc_errmsg(n)));
  return std::string(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
}

}  // namespace veomni
