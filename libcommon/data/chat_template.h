// ChatML conversations (<|im_start|>{role}\n{content}<|im_end|>\n per message, as Qwen's) to ids and training labels.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace veomni {

struct ChatMessage {
  std::string role;  // system, user, assistant or tool
  std::string content;
};

// Token ids and, per token, whether it is a training target (its label is the id) or not (label -100).
struct LabeledTokens {
  std::vector<int32_t> ids;
  std::vector<uint8_t> trained;

  int64_t size() const { return static_cast<int64_t>(ids.size()); }
  int64_t trained_count() const;
  // Keeps [begin, end) of the tokens.
  void keep(int64_t begin, int64_t end);
};

// The roles a conversation may use: system, user, assistant and tool (VeOmni's).
bool is_chat_role(std::string_view role);

class ChatTemplate {
 public:
  // Looks up <|im_start|>, <|im_end|> and "\n" (InputError naming the tokenizer when one is missing).
  explicit ChatTemplate(const Tokenizer& tokenizer);

  // The conversation as ChatML text: what encode's ids spell.
  static std::string render(std::span<const ChatMessage> messages);

  // The ids of render(messages), equal to tokenizing that whole text (every message starts with an added token,
  // so tokenizing message by message splits it the same way). Trained: the tokens of each assistant message's
  // content (a token that straddles the "assistant\n" header and the content counts as content) and its
  // <|im_end|>; never a role header, the "\n" after <|im_end|>, or any other role's tokens. InputError for a role
  // outside is_chat_role.
  LabeledTokens encode(std::span<const ChatMessage> messages) const;

 private:
  const Tokenizer& tokenizer_;
  int32_t im_start_, im_end_, newline_;
};

}  // namespace veomni
