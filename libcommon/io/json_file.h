// Reading and writing JSON files with errors that name the file, line and column.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace veomni {

// Python's json module writes NaN, Infinity and -Infinity, which are not JSON. Reject (the default) makes them a
// parse error; AsStrings reads them as the strings "NaN", "Infinity", "-Infinity" so that a validator can say
// which key and index hold one.
enum class NonFiniteTokens { Reject, AsStrings };

// The whole file as bytes; InputError naming the path when it is missing, a directory or unreadable.
std::string read_text_file(const std::string& path);

// Parses text that came from `source` (a path, or e.g. "model.safetensors (header)"); on failure throws
// InputError "<source>:<line>:<column>: invalid JSON: <reason>".
nlohmann::json parse_json(std::string_view text, const std::string& source);
// As parse_json, keeping the order of object keys as written.
nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& source,
                                          NonFiniteTokens non_finite = NonFiniteTokens::Reject);

nlohmann::json read_json_file(const std::string& path);
nlohmann::ordered_json read_ordered_json_file(const std::string& path,
                                              NonFiniteTokens non_finite = NonFiniteTokens::Reject);

// Writes value (indented, trailing newline) atomically.
void write_json_file(const std::string& path, const nlohmann::json& value, int indent = 2);
void write_json_file(const std::string& path, const nlohmann::ordered_json& value, int indent = 2);

}  // namespace veomni
