// JSON parsing that reports parse errors as "<file>:<line>:<column>", plus atomic JSON writes.
#include "io/json_file.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/atomic_file.h"

namespace veomni {

namespace {

struct TextPosition {
  size_t line = 1;
  size_t column = 1;
};

TextPosition position_of(std::string_view text, size_t offset) {
  const std::string_view before = text.substr(0, std::min(offset, text.size()));
  const size_t last_newline = before.rfind('\n');
  TextPosition pos;
  pos.line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  pos.column = last_newline == std::string_view::npos ? before.size() + 1 : before.size() - last_newline;
  return pos;
}

// nlohmann's message reads "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ...":
// keep the reason, since we print our own position.
std::string parse_error_reason(const std::string& what) {
  const size_t column = what.find("column ");
  const size_t colon = column == std::string::npos ? std::string::npos : what.find(": ", column);
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

[[noreturn]] void throw_parse_error(std::string_view text, const std::string& source,
                                    const nlohmann::json::parse_error& e) {
  // e.byte counts the characters read, so the offending one is at byte - 1.
  const TextPosition pos = position_of(text, e.byte == 0 ? 0 : e.byte - 1);
  throw InputError(
      fmt::format("{}:{}:{}: invalid JSON: {}", source, pos.line, pos.column, parse_error_reason(e.what())));
}

bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Quotes the bare tokens NaN, Infinity and -Infinity found outside strings.
std::string quote_non_finite_tokens(std::string_view text) {
  static constexpr std::string_view kTokens[] = {"-Infinity", "Infinity", "NaN"};
  std::string out;
  out.reserve(text.size());
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      in_string = escaped || c != '"';
      escaped = !escaped && c == '\\';
      out += c;
      continue;
    }
    if (c == '"') in_string = true;
    const bool at_boundary = i == 0 || !is_identifier_char(text[i - 1]);
    bool replaced = false;
    for (std::string_view token : kTokens) {
      const size_t end = i + token.size();
      const bool ends_token = end == text.size() || !is_identifier_char(text[end]);
      if (at_boundary && ends_token && text.substr(i, token.size()) == token) {
        out += '"';
        out += token;
        out += '"';
        i = end - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

template <typename Json>
Json parse_as(std::string_view text, const std::string& source) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    throw_parse_error(text, source, e);
  } catch (const nlohmann::json::out_of_range& e) {
    // A number beyond double's range (1E390) is reported as out_of_range, not as a parse error.
    throw InputError(fmt::format("{}: invalid JSON: {}", source, e.what()));
  }
}

}  // namespace

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  VEOMNI_INPUT_CHECK(!std::filesystem::is_directory(path, ec), "'{}' is a directory, expected a file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw InputError(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  return std::move(buffer).str();
}

nlohmann::json parse_json(std::string_view text, const std::string& source) {
  return parse_as<nlohmann::json>(text, source);
}

nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& source,
                                          NonFiniteTokens non_finite) {
  if (non_finite == NonFiniteTokens::Reject) return parse_as<nlohmann::ordered_json>(text, source);
  // Quoting adds two characters per token, which can shift reported columns on that line; lines stay exact.
  return parse_as<nlohmann::ordered_json>(quote_non_finite_tokens(text), source);
}

nlohmann::json read_json_file(const std::string& path) { return parse_json(read_text_file(path), path); }

nlohmann::ordered_json read_ordered_json_file(const std::string& path, NonFiniteTokens non_finite) {
  return parse_ordered_json(read_text_file(path), path, non_finite);
}

void write_json_file(const std::string& path, const nlohmann::json& value, int indent) {
  write_file_atomic(path, value.dump(indent) + "\n");
}

void write_json_file(const std::string& path, const nlohmann::ordered_json& value, int indent) {
  write_file_atomic(path, value.dump(indent) + "\n");
}

}  // namespace veomni
