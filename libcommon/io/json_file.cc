// JSON parsing that reports parse errors as "<file>:<line>:<column>", plus atomic JSON writes.
#include "io/json_file.h"

#include "core/utf8.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

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
  return quoted_excerpt(colon == std::string::npos ? what : what.substr(colon + 2));
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
      if (end > text.size()) continue;  // too near the end to hold this token
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

// nlohmann's other parse failures (out_of_range.406 "number overflow parsing '1e999'") carry no position: find the
// quoted token in the text instead.
TextPosition position_of_token(std::string_view text, const std::string& what) {
  const size_t open = what.find('\'');
  const size_t close = open == std::string::npos ? std::string::npos : what.rfind('\'');
  if (close == std::string::npos || close <= open + 1) return {};
  const size_t at = text.find(std::string_view(what).substr(open + 1, close - open - 1));
  return at == std::string_view::npos ? TextPosition{} : position_of(text, at);
}

// "[json.exception.out_of_range.406] number overflow parsing '1e999'" -> "number overflow parsing '1e999'".
std::string exception_reason(const std::string& what) {
  const size_t bracket = what.find("] ");
  return quoted_excerpt(what.starts_with("[json.exception.") && bracket != std::string::npos ? what.substr(bracket + 2)
                                                                                             : what);
}

template <typename Json>
Json parse_as(std::string_view text, const std::string& source) {
  check_no_nul_byte(text, source);
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    throw_parse_error(text, source, e);
  } catch (const nlohmann::json::exception& e) {
    const TextPosition pos = position_of_token(text, e.what());
    throw InputError(fmt::format("{}:{}:{}: invalid JSON: {}", source, pos.line, pos.column, exception_reason(e.what())));
  }
}

}  // namespace

std::string read_text_file(const std::string& path, uint64_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  VEOMNI_INPUT_CHECK(!fs::is_directory(path, ec), "'{}' is a directory, expected a file", path);
  const fs::file_status status = fs::status(path, ec);
  if (ec) throw InputError(fmt::format("cannot open '{}': {}", path, ec.message()));
  VEOMNI_INPUT_CHECK(fs::is_regular_file(status),
                     "'{}' is not a regular file (a device, pipe or socket); give the path of a file", path);
  const uint64_t size = fs::file_size(path, ec);
  VEOMNI_INPUT_CHECK(!ec && size <= max_bytes, "'{}' holds {} bytes, more than the {} bytes such a file may have",
                     path, size, max_bytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (in.bad() || static_cast<uint64_t>(in.gcount()) != size)
    throw InputError(fmt::format("cannot read '{}': {}", path, in.bad() ? std::strerror(errno) : "it shrank while read"));
  return text;
}

void check_no_nul_byte(std::string_view text, const std::string& source) {
  const size_t at = text.find('\0');
  if (at == std::string_view::npos) return;
  const TextPosition pos = position_of(text, at);
  throw InputError(fmt::format("{}:{}:{}: a NUL byte is not allowed (is this a text file?)", source, pos.line,
                               pos.column));
}

void check_utf8_text(std::string_view text, const std::string& source) {
  const std::optional<size_t> at = find_invalid_utf8(text);
  if (!at) return;
  const TextPosition pos = position_of(text, *at);
  throw InputError(fmt::format("{}:{}:{}: not UTF-8 text (byte 0x{:02X})", source, pos.line, pos.column,
                               static_cast<unsigned char>(text[*at])));
}

std::string quoted_excerpt(std::string_view text, size_t max_chars) {
  if (text.size() <= max_chars) return std::string(text);
  size_t cut = max_chars;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
  return fmt::format("{}… ({} bytes in all)", text.substr(0, cut), text.size());
}

nlohmann::json parse_json_line(std::string_view line) {
  const size_t nul = line.find('\0');
  if (nul != std::string_view::npos)
    throw InputError(fmt::format("a NUL byte at column {} is not allowed", nul + 1));
  try {
    return nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(
        fmt::format("invalid JSON at column {}: {}", e.byte == 0 ? 1 : e.byte, parse_error_reason(e.what())));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("invalid JSON at column {}: {}", position_of_token(line, e.what()).column,
                                 exception_reason(e.what())));
  }
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
