// Validation of one record's JSON, its encoding, and the truncation policy.
#include "data/text_preprocess_record.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer_unicode.h"
#include "io/json_file.h"

namespace veomni {

namespace {

using json = nlohmann::json;

const char* json_type(const json& value) { return value.type_name(); }

}  // namespace

json parse_record_line(std::string_view line) {
  if (const std::optional<size_t> bad = find_invalid_utf8(line))
    throw InputError(
        fmt::format("not valid UTF-8: byte 0x{:02x} at column {}", static_cast<unsigned char>(line[*bad]), *bad + 1));
  return parse_json_line(line);
}

std::vector<ChatMessage> parse_chat_messages(const json& list, std::string_view key,
                                             const std::optional<std::string>& system_prompt) {
  VEOMNI_INPUT_CHECK(list.is_array(), "\"{}\" is {}, expected an array", key, json_type(list));
  VEOMNI_INPUT_CHECK(!list.empty(), "\"{}\" is empty", key);
  std::vector<ChatMessage> messages;
  for (size_t k = 0; k < list.size(); ++k) {
    const json& m = list[k];
    VEOMNI_INPUT_CHECK(m.is_object(), "message {} is {}, expected an object", k, json_type(m));
    VEOMNI_INPUT_CHECK(m.contains("role") && m["role"].is_string(), "message {} has no \"role\" string", k);
    VEOMNI_INPUT_CHECK(m.contains("content"), "message {} has no \"content\"", k);
    VEOMNI_INPUT_CHECK(m["content"].is_string(),
                       "message {}: \"content\" is {}, expected a string (text conversations only)", k,
                       json_type(m["content"]));
    ChatMessage message{m["role"].get<std::string>(), m["content"].get<std::string>()};
    VEOMNI_INPUT_CHECK(is_chat_role(message.role),
                       "message {}: unknown role '{}' (expected system, user, assistant or tool)", k, message.role);
    messages.push_back(std::move(message));
  }
  if (system_prompt && messages.front().role != "system")
    messages.insert(messages.begin(), ChatMessage{"system", *system_prompt});
  return messages;
}

Truncation truncation_from_name(std::string_view name) {
  if (name == "right") return Truncation::Right;
  if (name == "left") return Truncation::Left;
  if (name == "drop") return Truncation::Drop;
  throw InputError(fmt::format("unknown truncation '{}' (expected left, right or drop)", name));
}

RecordEncoder::RecordEncoder(const Tokenizer& tokenizer, RecordOptions options)
    : tokenizer_(tokenizer),
      chat_(tokenizer),
      options_(std::move(options)),
      end_of_text_(tokenizer.require_token_id("<|endoftext|>")) {}

LabeledTokens RecordEncoder::encode_record(const json& record) const {
  VEOMNI_INPUT_CHECK(record.is_object(), "the record is {}, expected a JSON object", json_type(record));
  if (record.contains("messages")) {
    const std::vector<ChatMessage> messages =
        parse_chat_messages(record["messages"], "messages", options_.system_prompt);
    return chat_.encode(messages);
  }
  VEOMNI_INPUT_CHECK(record.contains(options_.text_key), "the record has neither \"messages\" nor \"{}\"",
                     options_.text_key);
  const json& text = record[options_.text_key];
  VEOMNI_INPUT_CHECK(text.is_string(), "\"{}\" is {}, expected a string", options_.text_key, json_type(text));
  LabeledTokens tokens;
  tokens.ids = tokenizer_.encode(text.get_ref<const std::string&>());
  tokens.ids.push_back(end_of_text_);
  tokens.trained.assign(tokens.ids.size(), 1);
  return tokens;
}

EncodedRecord RecordEncoder::finish(LabeledTokens tokens) const {
  EncodedRecord out;
  const int64_t limit = options_.max_seq_len;
  if (limit > 0 && tokens.size() > limit) {
    if (options_.truncation == Truncation::Drop) {
      out.status = RecordStatus::TooLong;
      return out;
    }
    if (options_.truncation == Truncation::Right)
      tokens.keep(0, limit);
    else
      tokens.keep(tokens.size() - limit, tokens.size());
    out.truncated = true;
  }
  out.status = tokens.trained_count() > 0 ? RecordStatus::Kept : RecordStatus::NoTarget;
  if (out.status == RecordStatus::Kept) out.tokens = std::move(tokens);
  return out;
}

EncodedRecord RecordEncoder::encode_value(const json& record) const {
  try {
    return finish(encode_record(record));
  } catch (const InputError& e) {
    return EncodedRecord{.status = RecordStatus::Bad, .error = e.what()};
  }
}

EncodedRecord RecordEncoder::encode_line(std::string_view line) const {
  json record;
  try {
    record = parse_record_line(line);
  } catch (const InputError& e) {
    return EncodedRecord{.status = RecordStatus::Bad, .error = e.what()};
  }
  return encode_value(record);
}

}  // namespace veomni
