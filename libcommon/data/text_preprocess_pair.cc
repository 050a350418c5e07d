// Validation of one preference record (prompt, answers, reference log-probs) and its rendering with the chat template.
#include "data/text_preprocess_pair.h"

#include <cmath>
#include <utility>
#include <vector>

#include "core/error.h"
#include "data/preference_record.h"
#include "data/text_preprocess_record.h"

namespace veomni {

namespace {

using json = nlohmann::json;

struct PairMessages {
  std::vector<ChatMessage> prompt, chosen, rejected;  // chosen and rejected: the answers only
};

// The messages under `key`, with the key named in any error.
std::vector<ChatMessage> messages_of(const json& record, const char* key, const std::optional<std::string>& system) {
  try {
    return parse_chat_messages(record[key], key, system);
  } catch (const InputError& e) {
    const std::string what = e.what();
    throw InputError(what.rfind("\"", 0) == 0 ? what : fmt::format("\"{}\" {}", key, what));
  }
}

void check_answer(const std::vector<ChatMessage>& answer, const char* key, size_t first_index) {
  VEOMNI_INPUT_CHECK(!answer.empty(), "\"{}\" has no answer after the prompt", key);
  bool any_content = false;
  for (size_t k = 0; k < answer.size(); ++k) {
    VEOMNI_INPUT_CHECK(answer[k].role == "assistant",
                       "\"{}\" message {} is a {} message; the answer after the prompt holds assistant messages only",
                       key, first_index + k, answer[k].role);
    any_content = any_content || !answer[k].content.empty();
  }
  VEOMNI_INPUT_CHECK(any_content, "the {} answer is empty", key);
}

// {"prompt": [...], "chosen": [answer], "rejected": [answer]}.
PairMessages explicit_prompt(const json& record, const std::optional<std::string>& system) {
  PairMessages out;
  out.prompt = messages_of(record, "prompt", system);
  out.chosen = messages_of(record, "chosen", std::nullopt);
  out.rejected = messages_of(record, "rejected", std::nullopt);
  check_answer(out.chosen, "chosen", 0);
  check_answer(out.rejected, "rejected", 0);
  return out;
}

bool same_message(const ChatMessage& a, const ChatMessage& b) { return a.role == b.role && a.content == b.content; }

// {"chosen": [conversation], "rejected": [conversation]}: the shared leading messages are the prompt.
PairMessages shared_prompt(const json& record, const std::optional<std::string>& system) {
  const std::vector<ChatMessage> chosen = messages_of(record, "chosen", system);
  const std::vector<ChatMessage> rejected = messages_of(record, "rejected", system);
  size_t shared = 0;
  while (shared < chosen.size() && shared < rejected.size() && same_message(chosen[shared], rejected[shared]))
    ++shared;
  VEOMNI_INPUT_CHECK(shared > 0, "\"chosen\" and \"rejected\" have different prompts: their first messages differ");
  VEOMNI_INPUT_CHECK(shared < chosen.size(), "\"chosen\" has no answer: all its {} messages are the prompt it shares "
                     "with \"rejected\"", chosen.size());
  VEOMNI_INPUT_CHECK(shared < rejected.size(), "\"rejected\" has no answer: all its {} messages are the prompt it "
                     "shares with \"chosen\"", rejected.size());
  for (const auto* side : {&chosen, &rejected})
    for (size_t k = shared; k < side->size(); ++k)
      VEOMNI_INPUT_CHECK((*side)[k].role == "assistant",
                         "\"chosen\" and \"rejected\" have different prompts: they differ from message {} on, and "
                         "\"{}\" message {} is a {} message (only assistant answers may differ)",
                         shared, side == &chosen ? "chosen" : "rejected", k, (*side)[k].role);
  PairMessages out;
  out.prompt.assign(chosen.begin(), chosen.begin() + static_cast<std::ptrdiff_t>(shared));
  out.chosen.assign(chosen.begin() + static_cast<std::ptrdiff_t>(shared), chosen.end());
  out.rejected.assign(rejected.begin() + static_cast<std::ptrdiff_t>(shared), rejected.end());
  check_answer(out.chosen, "chosen", shared);
  check_answer(out.rejected, "rejected", shared);
  return out;
}

// The record's prompt and answers: the checks every layout shares, then the layout's own.
PairMessages pair_messages(const json& record, const std::optional<std::string>& system) {
  VEOMNI_INPUT_CHECK(record.is_object(), "the record is {}, expected a JSON object", record.type_name());
  const bool chosen = record.contains("chosen"), rejected = record.contains("rejected");
  VEOMNI_INPUT_CHECK(chosen || rejected,
                     "the record has neither \"chosen\" nor \"rejected\" (expected {{\"chosen\": [...], "
                     "\"rejected\": [...]}}, optionally with \"prompt\")");
  VEOMNI_INPUT_CHECK(chosen && rejected, "the record has \"{}\" but no \"{}\": a preference pair needs both",
                     chosen ? "chosen" : "rejected", chosen ? "rejected" : "chosen");
  return has_prompt_messages(record) ? explicit_prompt(record, system) : shared_prompt(record, system);
}

}  // namespace

bool has_prompt_messages(const json& record) {
  // ultrafeedback_binarized also stores "prompt" as the first user turn's text: the conversations are then whole.
  return record.contains("prompt") && !record["prompt"].is_string();
}

void read_pair_ref_logps(const json& record, EncodedPair& pair) {
  const bool ref_chosen = record.contains("ref_chosen_logps"), ref_rejected = record.contains("ref_rejected_logps");
  VEOMNI_INPUT_CHECK(ref_chosen == ref_rejected, "the record has \"{}\" but no \"{}\" (give both or neither)",
                     ref_chosen ? "ref_chosen_logps" : "ref_rejected_logps",
                     ref_chosen ? "ref_rejected_logps" : "ref_chosen_logps");
  if (!ref_chosen) return;
  pair.has_ref_logps = true;
  pair.ref_chosen_logps = record_ref_logps(record, "ref_chosen_logps");
  pair.ref_rejected_logps = record_ref_logps(record, "ref_rejected_logps");
}

size_t pair_prompt_messages(const json& record, const std::optional<std::string>& system_prompt) {
  return pair_messages(record, system_prompt).prompt.size();
}

PairEncoder::PairEncoder(const Tokenizer& tokenizer, PairOptions options)
    : tokenizer_(tokenizer), chat_(tokenizer), options_(std::move(options)) {}

EncodedPair PairEncoder::encode_record(const json& record) const {
  const PairMessages messages = pair_messages(record, options_.system_prompt);
  EncodedPair pair;
  read_pair_ref_logps(record, pair);
  // Every message starts with an added token, so a conversation's ids are its prompt's ids followed by its answer's.
  const int64_t prompt_tokens = chat_.encode(messages.prompt).size();
  const auto render = [&](const std::vector<ChatMessage>& answer) {
    std::vector<ChatMessage> conversation = messages.prompt;
    conversation.insert(conversation.end(), answer.begin(), answer.end());
    LabeledTokens tokens = chat_.encode(conversation);
    std::fill(tokens.trained.begin(), tokens.trained.begin() + prompt_tokens, uint8_t{0});
    return tokens;
  };
  pair.chosen = render(messages.chosen);
  pair.rejected = render(messages.rejected);
  return pair;
}

PairResult pair_result(EncodedPair pair, int64_t max_seq_len) {
  if (max_seq_len > 0 && pair.size() > max_seq_len) return PairResult{.status = PairStatus::TooLong};
  return PairResult{.status = PairStatus::Kept, .pair = std::move(pair)};
}

PairResult PairEncoder::encode_value(const json& record) const {
  EncodedPair pair;
  try {
    pair = encode_record(record);
  } catch (const InputError& e) {
    return PairResult{.status = PairStatus::Bad, .error = e.what()};
  }
  return pair_result(std::move(pair), options_.max_seq_len);
}

PairResult PairEncoder::encode_line(std::string_view line) const {
  json record;
  try {
    record = parse_record_line(line);
  } catch (const InputError& e) {
    return PairResult{.status = PairStatus::Bad, .error = e.what()};
  }
  return encode_value(record);
}

}  // namespace veomni
