// The GPT-2 byte-level alphabet: every byte spelled as one printable code point, as byte-level BPE vocabularies are.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace veomni {

// The code point that spells byte b (GPT-2's bytes_to_unicode): printable Latin-1 bytes ('!'..'~', '¡'..'¬',
// '®'..'ÿ') spell themselves, the other 68 bytes take U+0100 onwards in byte order (' ' is 'Ġ' U+0120).
char32_t byte_to_unicode(uint8_t b);

// The byte that code point cp spells; nullopt when cp is not in the alphabet.
std::optional<uint8_t> unicode_to_byte(char32_t cp);

// Raw bytes spelled in the alphabet (" world" -> "Ġworld"), UTF-8 encoded.
std::string byte_level_spell(std::string_view bytes);

// The raw bytes a spelled token stands for ("Ġworld" -> " world"); nullopt when the text is not valid UTF-8 or
// holds a code point outside the alphabet.
std::optional<std::string> byte_level_unspell(std::string_view spelled);

}  // namespace veomni
