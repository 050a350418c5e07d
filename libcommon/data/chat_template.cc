// ChatML rendering and its label mask, message by message.
#include "data/chat_template.h"

#include <numeric>

#include "core/error.h"

namespace veomni {

namespace {

constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";

}  // namespace

int64_t LabeledTokens::trained_count() const { return std::accumulate(trained.begin(), trained.end(), int64_t{0}); }

void LabeledTokens::keep(int64_t begin, int64_t end) {
  VEOMNI_CHECK(begin >= 0 && begin <= end && end <= size(), "keep [{}, {}) of {} tokens", begin, end, size());
  ids.erase(ids.begin() + end, ids.end());
  ids.erase(ids.begin(), ids.begin() + begin);
  trained.erase(trained.begin() + end, trained.end());
  trained.erase(trained.begin(), trained.begin() + begin);
}

bool is_chat_role(std::string_view role) {
  return role == "system" || role == "user" || role == "assistant" || role == "tool";
}

ChatTemplate::ChatTemplate(const Tokenizer& tokenizer)
    : tokenizer_(tokenizer),
      im_start_(tokenizer.require_token_id(kImStart)),
      im_end_(tokenizer.require_token_id(kImEnd)),
      newline_(tokenizer.require_token_id("\n")) {}

std::string ChatTemplate::render(std::span<const ChatMessage> messages) {
  std::string text;
  for (const ChatMessage& m : messages) {
    text += kImStart;
    text += m.role;
    text += '\n';
    text += m.content;
    text += kImEnd;
    text += '\n';
  }
  return text;
}

LabeledTokens ChatTemplate::encode(std::span<const ChatMessage> messages) const {
  LabeledTokens out;
  TokenizedText body;
  for (size_t k = 0; k < messages.size(); ++k) {
    const ChatMessage& m = messages[k];
    VEOMNI_INPUT_CHECK(is_chat_role(m.role), "message {}: unknown role '{}' (expected system, user, assistant or tool)",
                       k, m.role);
    const bool assistant = m.role == "assistant";
    out.ids.push_back(im_start_);
    out.trained.push_back(0);
    // NFC keeps the ASCII header "role\n" as it is, so its length is also its length in the normalised text.
    const size_t header = m.role.size() + 1;
    body.ids.clear();
    body.ends.clear();
    tokenizer_.encode(m.role + "\n" + m.content, body);
    for (size_t i = 0; i < body.ids.size(); ++i) {
      out.ids.push_back(body.ids[i]);
      out.trained.push_back(assistant && body.ends[i] > header ? 1 : 0);
    }
    out.ids.push_back(im_end_);
    out.trained.push_back(assistant ? 1 : 0);
    out.ids.push_back(newline_);
    out.trained.push_back(0);
  }
  return out;
}

}  // namespace veomni
