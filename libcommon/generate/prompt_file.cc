// Parsing and checking the prompt JSONL of veomni-generate.
#include "generate/prompt_file.h"

#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/error.h"
#include "io/json_file.h"

namespace veomni {

namespace {

PromptRecord parse_record(const std::string& line, const std::string& location) {
  nlohmann::ordered_json json;
  try {
    json = nlohmann::ordered_json::parse(parse_json_line(line).dump());
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", location, e.what()));
  }
  VEOMNI_INPUT_CHECK(json.is_object(), "{}: a prompt must be a JSON object, got {}", location, json.dump());
  const bool has_ids = json.contains("input_ids"), has_messages = json.contains("messages");
  VEOMNI_INPUT_CHECK(has_ids != has_messages,
                     "{}: a prompt needs exactly one of \"messages\" (a conversation) and \"input_ids\" (token ids)",
                     location);
  PromptRecord record;
  record.location = location;
  if (has_ids) {
    const auto& ids = json["input_ids"];
    VEOMNI_INPUT_CHECK(ids.is_array() && !ids.empty(), "{}: \"input_ids\" must be a non-empty list of token ids",
                       location);
    for (const auto& id : ids) {
      VEOMNI_INPUT_CHECK(id.is_number_integer(), "{}: \"input_ids\" holds {}, not a token id", location, id.dump());
      record.input_ids.push_back(id.get<int64_t>());
    }
  } else {
    VEOMNI_INPUT_CHECK(json["messages"].is_array() && !json["messages"].empty(),
                       "{}: \"messages\" must be a non-empty list of {{\"role\", \"content\"}} messages", location);
    record.messages = json["messages"];
  }
  return record;
}

}  // namespace

std::vector<PromptRecord> read_prompt_records(std::istream& in, const std::string& source) {
  std::vector<PromptRecord> records;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    records.push_back(parse_record(line, fmt::format("{}:{}", source, number)));
  }
  VEOMNI_INPUT_CHECK(!records.empty(), "{}: no prompts (one JSON object per line)", source);
  return records;
}

bool PromptRecord::has_media() const {
  if (!is_conversation()) return false;
  for (const auto& message : messages) {
    if (!message.is_object() || !message.contains("content") || !message["content"].is_array()) continue;
    for (const auto& part : message["content"])
      if (part.is_object() && part.contains("type") && part["type"].is_string() && part["type"] != "text") return true;
  }
  return false;
}

std::vector<PromptRecord> read_prompt_file(const std::string& path) {
  if (path == "-") return read_prompt_records(std::cin, "<stdin>");
  std::ifstream in(path);
  VEOMNI_INPUT_CHECK(in.good(), "--prompts {}: cannot open the file", path);
  std::vector<PromptRecord> records = read_prompt_records(in, path);
  const std::string dir = std::filesystem::path(path).parent_path().string();
  for (PromptRecord& record : records) record.media_dir = dir;
  return records;
}

void check_prompt_ids(const std::vector<int64_t>& ids, int64_t vocab, int64_t max_positions,
                      const std::string& location) {
  for (int64_t id : ids)
    VEOMNI_INPUT_CHECK(id >= 0 && id < vocab, "{}: token id {} is outside the model vocabulary [0, {})", location, id,
                       vocab);
  VEOMNI_INPUT_CHECK(static_cast<int64_t>(ids.size()) <= max_positions,
                     "{}: the prompt has {} tokens, more than the model's max_position_embeddings {}", location,
                     ids.size(), max_positions);
}

}  // namespace veomni
