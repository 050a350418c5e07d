// The GPT-2 byte <-> code point tables, built once.
#include "data/tokenizer_bytes.h"

#include <array>

#include "data/tokenizer_unicode.h"

namespace veomni {

namespace {

struct ByteAlphabet {
  std::array<char32_t, 256> to_unicode{};
  std::array<int16_t, 324> to_byte{};  // indexed by code point; every spelling is below U+0144

  ByteAlphabet() {
    to_byte.fill(-1);
    const auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
    char32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      to_unicode[b] = printable(b) ? static_cast<char32_t>(b) : next_extra++;
      to_byte[to_unicode[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet table;
  return table;
}

}  // namespace

char32_t byte_to_unicode(uint8_t b) { return alphabet().to_unicode[b]; }

std::optional<uint8_t> unicode_to_byte(char32_t cp) {
  const auto& table = alphabet().to_byte;
  if (cp >= table.size() || table[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(table[cp]);
}

std::string byte_level_spell(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, byte_to_unicode(static_cast<uint8_t>(c)));
  return out;
}

std::optional<std::string> byte_level_unspell(std::string_view spelled) {
  if (find_invalid_utf8(spelled)) return std::nullopt;
  std::string out;
  out.reserve(spelled.size());
  for (size_t at = 0; at < spelled.size();) {
    const std::optional<uint8_t> b = unicode_to_byte(next_code_point(spelled, at));
    if (!b) return std::nullopt;
    out += static_cast<char>(*b);
  }
  return out;
}

}  // namespace veomni
