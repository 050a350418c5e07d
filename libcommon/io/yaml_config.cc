// Parsing of YAML configs and command-line overrides against a field table, and writing them back as YAML.
#include "io/yaml_config.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <spdlog/fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "io/json_file.h"

namespace veomni {

namespace {

bool is_list(ConfigType type) {
  return type == ConfigType::IntList || type == ConfigType::DoubleList || type == ConfigType::StringList;
}

ConfigType element_type(ConfigType type) {
  switch (type) {
    case ConfigType::IntList: return ConfigType::Int;
    case ConfigType::DoubleList: return ConfigType::Double;
    case ConfigType::StringList: return ConfigType::String;
    default: return type;
  }
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

std::string trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  return std::string(text.substr(begin, text.find_last_not_of(" \t") - begin + 1));
}

// Accepts what YAML 1.1 and VeOmni's argparse helper accept as booleans.
std::optional<bool> parse_bool_text(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* word : {"true", "yes", "on", "y", "t", "1"})
    if (lower == word) return true;
  for (const char* word : {"false", "no", "off", "n", "f", "0"})
    if (lower == word) return false;
  return std::nullopt;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// YAML 1.1 (PyYAML, which VeOmni reads configs with) allows '_' between digits: 1_000 is 1000.
std::string without_digit_underscores(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool between_digits = text[i] == '_' && i > 0 && i + 1 < text.size() && is_digit(text[i - 1]);
    if (!between_digits) out += text[i];
  }
  return out;
}

std::optional<int64_t> parse_int_text(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  const bool negative = !text.empty() && text.front() == '-';
  std::string_view body = negative ? text.substr(1) : text;
  int base = 10;
  if (body.size() > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X')) {  // 0x1F, as in YAML 1.1
    base = 16;
    body.remove_prefix(2);
  }
  const std::string digits = (negative ? "-" : "") + without_digit_underscores(body);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return value;
}

std::optional<double> parse_double_text(std::string_view raw) {
  const std::string cleaned = without_digit_underscores(raw);
  std::string_view text = cleaned;
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
    return std::nullopt;
  return value;
}

[[noreturn]] void throw_bad_value(const ConfigFieldSpec& spec, const std::string& origin, const std::string& shown) {
  throw InputError(fmt::format("{}: '{}' expects {}, got {}", origin, spec.key, config_type_name(spec.type), shown));
}

std::string single_quoted(std::string_view text) { return fmt::format("'{}'", quoted_excerpt(text)); }

// Integer forms that YAML 1.1 reads differently from a plain decimal reading are refused rather than guessed:
// PyYAML reads 010 as octal 8 and 0o10 as a string.
void refuse_ambiguous_integer(std::string_view text, const ConfigFieldSpec& spec, const std::string& origin) {
  std::string_view digits = text;
  if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) digits.remove_prefix(1);
  const bool leading_zero = digits.size() > 1 && digits[0] == '0' && is_digit(digits[1]) &&
                            std::all_of(digits.begin(), digits.end(), [](char c) { return is_digit(c) || c == '_'; });
  if (leading_zero)
    throw InputError(fmt::format("{}: '{}': {} is ambiguous: YAML 1.1 (PyYAML) reads a leading 0 as octal; write the "
                                 "number without leading zeros",
                                 origin, spec.key, single_quoted(text)));
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'o' || digits[1] == 'O'))
    throw InputError(fmt::format("{}: '{}': {} is not a number in YAML 1.1 (PyYAML reads it as a string); write it "
                                 "in decimal",
                                 origin, spec.key, single_quoted(text)));
}

// Converts one scalar text to the element type of the field; `type` is the field's type or its list element type.
ConfigValue scalar_value(const ConfigFieldSpec& spec, ConfigType type, const std::string& text,
                         const std::string& origin) {
  switch (type) {
    case ConfigType::Bool:
      if (auto v = parse_bool_text(text)) return *v;
      break;
    case ConfigType::Int:
      refuse_ambiguous_integer(text, spec, origin);
      if (auto v = parse_int_text(text)) return *v;
      break;
    case ConfigType::Double:
      refuse_ambiguous_integer(text, spec, origin);
      if (auto v = parse_double_text(text)) return *v;
      break;
    case ConfigType::String: {
      const auto& choices = spec.options.choices;
      if (!choices.empty() && std::find(choices.begin(), choices.end(), text) == choices.end())
        throw InputError(fmt::format("{}: '{}' must be one of {}, got {}", origin, spec.key, fmt::join(choices, ", "),
                                     single_quoted(text)));
      return text;
    }
    default: break;
  }
  throw_bad_value(spec, origin, single_quoted(text));
}

ConfigValue list_value(const ConfigFieldSpec& spec, const std::vector<std::string>& items, const std::string& origin) {
  const ConfigType item_type = element_type(spec.type);
  std::vector<int64_t> ints;
  std::vector<double> doubles;
  std::vector<std::string> strings;
  for (const std::string& item : items) {
    ConfigValue v = scalar_value(spec, item_type, item, origin);
    if (item_type == ConfigType::Int) ints.push_back(std::get<int64_t>(v));
    else if (item_type == ConfigType::Double) doubles.push_back(std::get<double>(v));
    else strings.push_back(std::get<std::string>(v));
  }
  if (spec.type == ConfigType::IntList) return ints;
  if (spec.type == ConfigType::DoubleList) return doubles;
  return strings;
}

ConfigValue null_value(const ConfigFieldSpec& spec, const std::string& origin) {
  if (spec.options.null_means) return scalar_value(spec, spec.type, *spec.options.null_means, origin);
  if (spec.type == ConfigType::String) return std::string();
  if (is_list(spec.type)) return list_value(spec, {}, origin);
  throw_bad_value(spec, origin, "null");
}

// Leaves by key, and every proper dotted prefix of a leaf (the sections).
class FieldLookup {
 public:
  explicit FieldLookup(const std::vector<ConfigFieldSpec>& fields) {
    for (size_t i = 0; i < fields.size(); ++i) {
      leaves_[fields[i].key] = i;
      for (size_t dot = fields[i].key.find('.'); dot != std::string::npos; dot = fields[i].key.find('.', dot + 1))
        sections_.insert(fields[i].key.substr(0, dot));
    }
  }
  std::optional<size_t> leaf(const std::string& key) const {
    const auto it = leaves_.find(key);
    return it == leaves_.end() ? std::nullopt : std::optional<size_t>(it->second);
  }
  bool is_section(const std::string& key) const { return sections_.contains(key); }
  const std::set<std::string>& sections() const { return sections_; }

 private:
  std::map<std::string, size_t> leaves_;
  std::set<std::string> sections_;
};

std::string unknown_key_message(const std::string& key, const std::string& where,
                                const std::vector<ConfigFieldSpec>& fields) {
  const std::string guess = closest_config_key(key, fields);
  return fmt::format("unknown key '{}' in {}{}", key, where,
                     guess.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", guess));
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string last_component(const std::string& key) {
  const size_t dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

// --- YAML -----------------------------------------------------------------------------------------------------

class YamlWalker {
 public:
  YamlWalker(const std::string& source, const std::vector<ConfigFieldSpec>& fields)
      : source_(source), fields_(fields), lookup_(fields) {}

  std::vector<ConfigAssignment> walk(const YAML::Node& root) {
    if (root.IsNull()) return {};
    if (!root.IsMap())
      throw InputError(fmt::format("{} line {}: a config is a mapping of sections (model:, data:, train:)", source_,
                                   root.Mark().line + 1));
    walk_map(root, "");
    return std::move(assignments_);
  }

 private:
  std::string origin(const YAML::Node& node) const { return fmt::format("{} line {}", source_, node.Mark().line + 1); }

  void walk_map(const YAML::Node& map, const std::string& prefix) {
    std::set<std::string> seen;
    for (const auto& entry : map) {
      // Copies: yaml-cpp's map entries are proxies, and nodes are cheap handles.
      const YAML::Node name = entry.first;
      const YAML::Node value = entry.second;
      if (!name.IsScalar()) throw InputError(fmt::format("{}: keys must be plain names", origin(name)));
      const std::string key = prefix.empty() ? name.Scalar() : prefix + "." + name.Scalar();
      if (!seen.insert(name.Scalar()).second)
        throw InputError(fmt::format("{}: key '{}' appears twice", origin(name), key));
      visit(key, name, value);
    }
  }

  void visit(const std::string& key, const YAML::Node& name, const YAML::Node& value) {
    if (const auto field = lookup_.leaf(key)) {
      assignments_.push_back({*field, convert(fields_[*field], value, origin(name)), origin(name)});
    } else if (lookup_.is_section(key)) {
      if (value.IsMap()) walk_map(value, key);
      else if (!value.IsNull())
        throw InputError(fmt::format("{}: '{}' is a section: expected a mapping of its keys, got {}", origin(name),
                                     key, describe(value)));
    } else {
      throw InputError(unknown_key_message(key, origin(name), fields_));
    }
  }

  static std::string describe(const YAML::Node& node) {
    if (node.IsScalar()) return single_quoted(node.Scalar());
    if (node.IsSequence()) return "a list";
    if (node.IsMap()) return "a mapping";
    return "null";
  }

  // {a: 1, b: x}: a mapping item as one line of YAML.
  static std::string flow_text(const YAML::Node& node) {
    YAML::Emitter out;
    out.SetMapFormat(YAML::Flow);
    out.SetSeqFormat(YAML::Flow);
    out << node;
    return out.c_str();
  }

  static ConfigValue convert(const ConfigFieldSpec& spec, const YAML::Node& node, const std::string& where) {
    if (node.IsNull()) return null_value(spec, where);
    if (!is_list(spec.type)) {
      if (!node.IsScalar()) throw_bad_value(spec, where, describe(node));
      return scalar_value(spec, spec.type, node.Scalar(), where);
    }
    if (!node.IsSequence()) throw_bad_value(spec, where, describe(node));
    std::vector<std::string> items;
    for (const YAML::Node& item : node) {
      if (item.IsMap() && spec.options.mapping_items) {
        items.push_back(flow_text(item));
        continue;
      }
      if (!item.IsScalar()) throw_bad_value(spec, where, fmt::format("{} inside the list", describe(item)));
      items.push_back(item.Scalar());
    }
    return list_value(spec, items, where);
  }

  const std::string& source_;
  const std::vector<ConfigFieldSpec>& fields_;
  FieldLookup lookup_;
  std::vector<ConfigAssignment> assignments_;
};

// --- command line ---------------------------------------------------------------------------------------------

// Commas inside { } belong to a mapping item ({path: a.h5, weight: 2}), not between items.
std::vector<std::string> split_outside_braces(std::string_view text) {
  std::vector<std::string> parts(1);
  int depth = 0;
  for (char c : text) {
    depth += c == '{' ? 1 : c == '}' ? -1 : 0;
    if (c == ',' && depth <= 0) parts.emplace_back();
    else parts.back() += c;
  }
  return parts;
}

// "0.9,0.95", "[0.9, 0.95]" and "[]" all name list items.
void append_list_items(std::string_view token, std::vector<std::string>& items) {
  std::string text = trim(token);
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  for (const std::string& part : split_outside_braces(text)) {
    std::string item = trim(part);
    if (!item.empty()) items.push_back(std::move(item));
  }
}

bool is_option(const std::string& arg) { return arg.size() > 2 && arg.starts_with("--"); }

// --- writing --------------------------------------------------------------------------------------------------

// Shortest text that reads back exactly, always with a decimal point in the mantissa ("1.0", "5.0e-05"): YAML 1.1
// readers such as PyYAML take "5e-05" for a string.
std::string format_double(double v) {
  if (std::isnan(v)) return ".nan";
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  std::string text = fmt::format("{}", v);
  const size_t exponent = text.find_first_of("eE");
  const size_t mantissa_end = exponent == std::string::npos ? text.size() : exponent;
  if (text.substr(0, mantissa_end).find('.') == std::string::npos) text.insert(mantissa_end, ".0");
  return text;
}

std::string format_string(const std::string& s) {
  // A JSON string is a valid YAML double-quoted scalar.
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

struct ValueFormatter {
  std::string operator()(bool v) const { return v ? "true" : "false"; }
  std::string operator()(int64_t v) const { return fmt::format("{}", v); }
  std::string operator()(double v) const { return format_double(v); }
  std::string operator()(const std::string& v) const { return format_string(v); }
  template <class T>
  std::string operator()(const std::vector<T>& items) const {
    std::vector<std::string> parts;
    for (const T& item : items) parts.push_back((*this)(item));
    return fmt::format("[{}]", fmt::join(parts, ", "));
  }
};

// A section or a leaf of the YAML being written, in order of first appearance.
struct YamlEntry {
  std::string name;
  std::optional<size_t> field;  // leaf
  std::vector<YamlEntry> children;
};

void insert_entry(std::vector<YamlEntry>& level, const std::vector<std::string>& path, size_t depth, size_t field) {
  if (depth + 1 == path.size()) {
    level.push_back(YamlEntry{path[depth], field, {}});
    return;
  }
  auto it = std::find_if(level.begin(), level.end(),
                         [&](const YamlEntry& e) { return !e.field && e.name == path[depth]; });
  if (it == level.end()) it = level.insert(level.end(), YamlEntry{path[depth], std::nullopt, {}});
  insert_entry(it->children, path, depth + 1, field);
}

void emit_entries(const std::vector<YamlEntry>& level, const std::vector<ConfigValue>& values, size_t depth,
                  std::string& out) {
  const std::string indent(2 * depth, ' ');
  for (size_t i = 0; i < level.size(); ++i) {
    const YamlEntry& e = level[i];
    if (depth == 0 && i > 0) out += '\n';
    if (e.field) {
      out += fmt::format("{}{}: {}\n", indent, e.name, format_config_value(values[*e.field]));
    } else {
      out += fmt::format("{}{}:\n", indent, e.name);
      emit_entries(e.children, values, depth + 1, out);
    }
  }
}

}  // namespace

const char* config_type_name(ConfigType type) {
  switch (type) {
    case ConfigType::Bool: return "bool";
    case ConfigType::Int: return "int";
    case ConfigType::Double: return "float";
    case ConfigType::String: return "string";
    case ConfigType::IntList: return "list of int";
    case ConfigType::DoubleList: return "list of float";
    case ConfigType::StringList: return "list of string";
  }
  return "?";
}

std::string closest_config_key(const std::string& key, const std::vector<ConfigFieldSpec>& fields) {
  std::vector<std::string> candidates;
  for (const ConfigFieldSpec& f : fields) candidates.push_back(f.key);
  const FieldLookup lookup(fields);
  for (const std::string& section : lookup.sections()) candidates.push_back(section);

  std::string best;
  size_t best_distance = std::string::npos;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(key, c);
    if (d < best_distance) best = c, best_distance = d;
  }
  // A typo: at most a couple of edits, more for long keys.
  if (best_distance <= std::max<size_t>(2, key.size() / 6)) return best;

  // A key put in the wrong section, e.g. train.lr for train.optimizer.lr.
  const std::string leaf = last_component(key);
  best.clear();
  best_distance = std::string::npos;
  for (const ConfigFieldSpec& f : fields) {
    if (last_component(f.key) != leaf) continue;
    const size_t d = edit_distance(key, f.key);
    if (d < best_distance) best = f.key, best_distance = d;
  }
  return best;
}

namespace {

// yaml-cpp 0.7 never returns from LoadAll on a document whose first token is a ',' (",", "---\n,", "  ,", after
// a tag or anchor "!=,", "&a ,", or after a '%' line; found by fuzz_train_config): such text is refused with a
// message of its own before it reaches the parser. A ',' after a document's value is caught by load_one_document.
void check_no_leading_comma(std::string_view text, const std::string& source) {
  bool at_document_start = true;
  size_t line_number = 0;
  for (size_t begin = 0; begin <= text.size();) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    std::string_view line = text.substr(begin, end - begin);
    const char* const line_start = line.data();
    ++line_number;
    begin = end + 1;
    line.remove_prefix(std::min(line.find_first_not_of(" \t\r"), line.size()));
    if (line.starts_with("---") || line.starts_with("...")) {
      at_document_start = true;
      line.remove_prefix(3);
      line.remove_prefix(std::min(line.find_first_not_of(" \t\r"), line.size()));
    }
    if (line.starts_with('%')) at_document_start = true;  // yaml-cpp takes a directive line as a new document's
    if (!at_document_start || line.empty() || line.front() == '#' || line.front() == '%') continue;
    while (!line.empty() && (line.front() == '!' || line.front() == '&')) {  // a tag or anchor before the node
      line.remove_prefix(std::min(line.find_first_of(" \t\r,"), line.size()));
      line.remove_prefix(std::min(line.find_first_not_of(" \t\r"), line.size()));
    }
    if (line.empty()) continue;
    if (line.front() == ',')
      throw InputError(fmt::format("{} line {}, column {}: invalid YAML: a document cannot begin with ',' (quote a "
                                   "value that begins with one)",
                                   source, line_number, line.data() - line_start + 1));
    at_document_start = false;
  }
}

// Records where each YAML document starts; the other parse events are not needed.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> marks;
  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

std::string yaml_position(const std::string& source, const YAML::Mark& mark) {
  if (mark.is_null()) return source;
  return fmt::format("{} line {}, column {}", source, mark.line + 1, mark.column + 1);
}

// The first document of `text`, refusing a second one. yaml-cpp 0.7's LoadAll never returns when a document is
// followed by a token that no node begins with, such as a ',' outside [ ] and { } ("--- \",\",", "[a] ,"): its
// parser then reads an empty document without consuming the token, again and again. So documents are read one at a
// time, three at most, and a document that starts where the previous one did is reported at the token it is stuck on.
YAML::Node load_one_document(std::string_view text, const std::string& source) {
  const std::string owned(text);
  try {
    std::istringstream stream(owned);
    YAML::Parser parser(stream);
    DocumentStarts documents;
    for (int i = 0; i < 3 && parser.HandleNextDocument(documents); ++i) {
    }
    const std::vector<YAML::Mark>& starts = documents.marks;
    for (size_t i = 1; i < starts.size(); ++i) {
      if (starts[i].pos != starts[i - 1].pos) continue;
      const size_t at = static_cast<size_t>(std::max(starts[i].pos, 0));
      const char token = at < owned.size() ? owned[at] : ' ';
      throw InputError(fmt::format("{}: invalid YAML: '{}' cannot follow the document's value{}",
                                   yaml_position(source, starts[i]), token,
                                   token == ',' ? " (a comma separates items only inside [ ] or { }; quote a value "
                                                  "that contains one)"
                                                : ""));
    }
    if (starts.size() > 1)
      throw InputError(fmt::format("{} line {}: a second YAML document ('---'): a config is one document; merge the "
                                   "two or split them into two files",
                                   source, starts[1].line + 1));
    return starts.empty() ? YAML::Node() : YAML::Load(owned);
  } catch (const YAML::DeepRecursion& e) {
    throw InputError(fmt::format("{} line {}: invalid YAML: nested more than {} levels deep (a config has a few)",
                                 source, e.mark.line + 1, e.depth()));
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}: invalid YAML: {}", yaml_position(source, e.mark), e.msg));
  }
}

}  // namespace

std::vector<ConfigAssignment> parse_yaml_assignments(std::string_view text, const std::string& source,
                                                     const std::vector<ConfigFieldSpec>& fields) {
  check_no_nul_byte(text, source);
  check_utf8_text(text, source);
  check_no_leading_comma(text, source);
  return YamlWalker(source, fields).walk(load_one_document(text, source));
}

std::vector<ConfigAssignment> parse_override_assignments(const std::vector<std::string>& args,
                                                         const std::vector<ConfigFieldSpec>& fields) {
  const FieldLookup lookup(fields);
  std::vector<ConfigAssignment> out;
  for (size_t i = 0; i < args.size();) {
    const std::string& arg = args[i++];
    if (!is_option(arg))
      throw InputError(fmt::format("unexpected command-line argument '{}' (config overrides look like "
                                   "--train.optimizer.lr 1e-4 or --train.optimizer.lr=1e-4)",
                                   arg));
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const std::string where = fmt::format("command line --{}", key);
    const auto field = lookup.leaf(key);
    if (!field) {
      if (lookup.is_section(key))
        throw InputError(fmt::format("{}: '{}' is a section; override one of its keys (e.g. --{}.<key> value)", where,
                                     key, key));
      throw InputError(unknown_key_message(key, fmt::format("command-line override '{}'", arg), fields));
    }
    const ConfigFieldSpec& spec = fields[*field];

    std::vector<std::string> tokens;
    if (eq != std::string::npos) tokens.push_back(arg.substr(eq + 1));
    else
      while (i < args.size() && !is_option(args[i]) && (is_list(spec.type) || tokens.empty())) tokens.push_back(args[i++]);

    if (is_list(spec.type)) {
      std::vector<std::string> items;
      for (const std::string& t : tokens) append_list_items(t, items);
      out.push_back({*field, list_value(spec, items, where), where});
    } else if (tokens.empty()) {
      if (spec.type != ConfigType::Bool) throw InputError(fmt::format("{}: '{}' needs a value", where, key));
      out.push_back({*field, true, where});
    } else {
      out.push_back({*field, scalar_value(spec, spec.type, tokens.front(), where), where});
    }
  }
  return out;
}

std::string format_config_value(const ConfigValue& value) { return std::visit(ValueFormatter{}, value); }

std::string format_config_yaml(const std::vector<ConfigFieldSpec>& fields, const std::vector<ConfigValue>& values) {
  VEOMNI_CHECK(fields.size() == values.size(), "{} fields but {} values", fields.size(), values.size());
  std::vector<YamlEntry> top;
  for (size_t i = 0; i < fields.size(); ++i) insert_entry(top, split(fields[i].key, '.'), 0, i);
  std::string out;
  emit_entries(top, values, 0, out);
  return out;
}

}  // namespace veomni
