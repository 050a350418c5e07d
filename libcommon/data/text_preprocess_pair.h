// One preference record of veomni-preprocess preference ({"chosen": [...], "rejected": [...]}, optionally with a
// "prompt") to the labelled tokens of its chosen and rejected conversations.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "data/chat_template.h"
#include "data/tokenizer.h"

namespace veomni {

struct PairOptions {
  std::optional<std::string> system_prompt;  // prepended to prompts that do not start with a system message
  int64_t max_seq_len = 0;                   // longest pair (chosen + rejected tokens); 0: no limit
};

// A pair as it is stored: the two conversations share their prompt tokens, whose labels are off (only the answers
// train), and optionally the reference model's log-probabilities of each answer.
struct EncodedPair {
  LabeledTokens chosen, rejected;
  bool has_ref_logps = false;
  float ref_chosen_logps = 0, ref_rejected_logps = 0;

  int64_t size() const { return chosen.size() + rejected.size(); }
};

enum class PairStatus { Kept, TooLong, Bad };

struct PairResult {
  PairStatus status = PairStatus::Bad;
  EncodedPair pair;   // Kept only
  std::string error;  // Bad only: what is wrong, without the location
};

// A pair encoded from a good record: Kept, or TooLong (and empty) beyond max_seq_len tokens (0: no limit).
PairResult pair_result(EncodedPair pair, int64_t max_seq_len);

// Whether the record gives its prompt as messages ({"prompt": [...], "chosen": [answer], "rejected": [answer]}); else
// "chosen" and "rejected" are whole conversations sharing their leading messages.
bool has_prompt_messages(const nlohmann::json& record);
// The record's optional "ref_chosen_logps" and "ref_rejected_logps" into the pair (InputError when one comes alone or
// is not a finite number).
void read_pair_ref_logps(const nlohmann::json& record, EncodedPair& pair);
// How many leading messages of each conversation of the pair are its prompt, counting `system_prompt` where it is
// prepended; InputError for a bad record (PairEncoder::encode_record's checks).
size_t pair_prompt_messages(const nlohmann::json& record, const std::optional<std::string>& system_prompt);

class PairEncoder {
 public:
  PairEncoder(const Tokenizer& tokenizer, PairOptions options);

  // A JSONL line or a parsed record; never throws for bad data (the result is then Bad with the reason).
  PairResult encode_line(std::string_view line) const;
  PairResult encode_value(const nlohmann::json& record) const;

  // The record's pair (InputError for a bad one). Two layouts: {"prompt": [...], "chosen": [...], "rejected": [...]}
  // with assistant answers, or {"chosen": [...], "rejected": [...]} as two whole conversations whose shared leading
  // messages are the prompt and whose remaining messages, the answers, are assistant messages (a string "prompt",
  // as ultrafeedback_binarized has beside them, is ignored). Optional numbers
  // "ref_chosen_logps" and "ref_rejected_logps" come together. Each conversation is rendered with the ChatML
  // template of `veomni-preprocess text`; the answers' content and <|im_end|> are the only targets.
  EncodedPair encode_record(const nlohmann::json& record) const;

 private:
  const Tokenizer& tokenizer_;
  ChatTemplate chat_;
  PairOptions options_;
};

}  // namespace veomni
