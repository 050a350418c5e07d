// One input record of veomni-preprocess text ({"messages": [...]} or {"text": ...}) to labelled tokens.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/chat_template.h"
#include "data/tokenizer.h"

namespace veomni {

// What to do with a sample longer than max_seq_len: keep its first tokens, its last tokens, or leave it out.
enum class Truncation { Right, Left, Drop };
// "right", "left", "drop"; InputError for other names.
Truncation truncation_from_name(std::string_view name);

struct RecordOptions {
  std::string text_key = "text";             // the key of plain-text records
  std::optional<std::string> system_prompt;  // prepended to conversations that do not start with a system message
  int64_t max_seq_len = 0;                   // 0: no limit
  Truncation truncation = Truncation::Right;
};

// One JSONL line as JSON; InputError "not valid UTF-8: byte 0xff at column 12" or "invalid JSON at column 7: ...".
nlohmann::json parse_record_line(std::string_view line);

// The messages of a conversation array under `key` ("messages", "chosen", ...): objects with a role (system, user,
// assistant, tool) and a string content; InputError naming the message otherwise. system_prompt, when given, is
// prepended unless the first message is a system one.
std::vector<ChatMessage> parse_chat_messages(const nlohmann::json& list, std::string_view key,
                                             const std::optional<std::string>& system_prompt);

enum class RecordStatus { Kept, TooLong, NoTarget, Bad };

struct EncodedRecord {
  RecordStatus status = RecordStatus::Bad;
  LabeledTokens tokens;    // Kept only
  bool truncated = false;  // Kept after truncation
  std::string error;       // Bad only: what is wrong, without the location
};

class RecordEncoder {
 public:
  // Looks up <|endoftext|> (appended to plain text) and the ChatML tokens.
  RecordEncoder(const Tokenizer& tokenizer, RecordOptions options);

  // A JSONL line: its bytes must be UTF-8 and hold one JSON object. Never throws for bad data: the record is
  // then Bad with the reason.
  EncodedRecord encode_line(std::string_view line) const;
  // An already parsed record (an element of a JSON array input).
  EncodedRecord encode_value(const nlohmann::json& record) const;

  // Conversations: ChatML, targets on assistant content and its <|im_end|>. Plain text: the text's ids then
  // <|endoftext|>, all of them targets. Then truncation to max_seq_len; a sample left without any target is
  // NoTarget (a conversation without an assistant message, or cut before one).
  LabeledTokens encode_record(const nlohmann::json& record) const;

  // Truncation to max_seq_len and the record's status (TooLong, NoTarget or Kept).
  EncodedRecord finish(LabeledTokens tokens) const;

 private:

  const Tokenizer& tokenizer_;
  ChatTemplate chat_;
  RecordOptions options_;
  int32_t end_of_text_;
};

}  // namespace veomni
