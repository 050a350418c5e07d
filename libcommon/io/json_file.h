// Reading and writing JSON files with errors that name the file, line and column.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace veomni {

// Python's json module writes NaN, Infinity and -Infinity, which are not JSON. Reject (the default) makes them a
// parse error; AsStrings reads them as the strings "NaN", "Infinity", "-Infinity" so that a validator can say
// which key and index hold one.
enum class NonFiniteTokens { Reject, AsStrings };

// The largest file read_text_file takes by default: configs, tokenizer.json and metadata are far smaller, and a
// bigger one is almost always the wrong path.
inline constexpr uint64_t kMaxTextFileBytes = uint64_t{1} << 30;

// The whole file as bytes; InputError naming the path when it is missing, not a regular file (a directory,
// /dev/zero, a pipe), larger than max_bytes, or unreadable.
std::string read_text_file(const std::string& path, uint64_t max_bytes = kMaxTextFileBytes);

// "<source>:<line>:<column>: <what> (a NUL byte is not allowed)" for the first NUL byte of text, if any; parsers
// would otherwise stop there (nlohmann reads it as the end of input) or report a garbled escape.
void check_no_nul_byte(std::string_view text, const std::string& source);

// "<source>:<line>:<column>: not UTF-8 text (byte 0xNN)" for the first ill-formed UTF-8 sequence of text, if any.
void check_utf8_text(std::string_view text, const std::string& source);

// text cut to max_chars characters, with "…" when it was longer: for quoting input in messages.
std::string quoted_excerpt(std::string_view text, size_t max_chars = 200);

// Parses text that came from `source` (a path, or e.g. "model.safetensors (header)"); on failure throws
// InputError "<source>:<line>:<column>: invalid JSON: <reason>", also for a number out of range (1e999) and a
// NUL byte. Every parse of outside bytes goes through here (or parse_json_line).
nlohmann::json parse_json(std::string_view text, const std::string& source);
// As parse_json, keeping the order of object keys as written.
nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& source,
                                          NonFiniteTokens non_finite = NonFiniteTokens::Reject);

// One JSONL line: as parse_json, but the message reads "invalid JSON at column <c>: <reason>" (the caller names
// the file and line).
nlohmann::json parse_json_line(std::string_view line);

nlohmann::json read_json_file(const std::string& path);
nlohmann::ordered_json read_ordered_json_file(const std::string& path,
                                              NonFiniteTokens non_finite = NonFiniteTokens::Reject);

// Writes value (indented, trailing newline) atomically.
void write_json_file(const std::string& path, const nlohmann::json& value, int indent = 2);
void write_json_file(const std::string& path, const nlohmann::ordered_json& value, int indent = 2);

}  // namespace veomni
