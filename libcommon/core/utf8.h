// UTF-8 well-formedness check, shared by the tokenizer and the config readers.
#pragma once
#include <cstddef>
#include <optional>
#include <string_view>

namespace veomni {

// Offset of the first byte that does not start a well-formed UTF-8 sequence (overlong forms, surrogates and code
// points above U+10FFFF are ill-formed); nullopt when the whole text is valid.
std::optional<size_t> find_invalid_utf8(std::string_view text);

}  // namespace veomni
