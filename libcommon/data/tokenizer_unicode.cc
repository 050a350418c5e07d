// UTF-8 checks and NFC through utf8proc (Unicode's composition tables, kept current by its maintainers).
#include "data/tokenizer_unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/error.h"

namespace veomni {

namespace {

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the well-formed sequence starting at text[i], or 0 when it is ill-formed (Unicode Table 3-7).
size_t sequence_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  const size_t left = text.size() - i;
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return left >= 2 && is_continuation(byte(i + 1)) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    if (left < 3 || !is_continuation(byte(i + 2))) return 0;
    const unsigned char second = byte(i + 1);
    const unsigned char low = lead == 0xE0 ? 0xA0 : 0x80;   // no overlong forms
    const unsigned char high = lead == 0xED ? 0x9F : 0xBF;  // no surrogates
    return second >= low && second <= high ? 3 : 0;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    if (left < 4 || !is_continuation(byte(i + 2)) || !is_continuation(byte(i + 3))) return 0;
    const unsigned char second = byte(i + 1);
    const unsigned char low = lead == 0xF0 ? 0x90 : 0x80;   // no overlong forms
    const unsigned char high = lead == 0xF4 ? 0x8F : 0xBF;  // nothing above U+10FFFF
    return second >= low && second <= high ? 4 : 0;
  }
  return 0;
}

// Every code point below U+0300 is NFC in any context: none decomposes and none combines with a neighbour
// (the first combining marks are at U+0300). Such text skips utf8proc; in UTF-8 its bytes are all below 0xCC.
bool trivially_nfc(std::string_view text) {
  for (char c : text)
    if (static_cast<unsigned char>(c) >= 0xCC) return false;
  return true;
}

}  // namespace

std::optional<size_t> find_invalid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t n = sequence_length(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

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
