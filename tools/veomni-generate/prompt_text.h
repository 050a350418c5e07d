// Text on both sides of veomni-generate: conversations rendered by the chat template and tokenized, generated ids
// decoded; through the model's tokenizer.json where this build has the tokenizer library and the model has one.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace veomni {

class PromptText {
 public:
  // tokenizer_dir: the folder holding tokenizer.json; chat_template: chatml, model or a template file (as
  // veomni-preprocess --chat-template). Nothing is loaded when the folder has no tokenizer.json.
  PromptText(const std::string& tokenizer_dir, const std::string& chat_template);
  ~PromptText();

  // A tokenizer is loaded: outputs carry text.
  bool has_tokenizer() const;
  // The ids of the conversation as the template renders it with the generation prompt (the assistant's turn
  // opened). InputError naming `location` without a tokenizer, for a bad message or a failing template.
  std::vector<int64_t> encode_conversation(const nlohmann::ordered_json& messages, const std::string& location);
  // The text of generated ids, special tokens left out.
  std::string decode(const std::vector<int64_t>& ids) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string tokenizer_dir_;
};

}  // namespace veomni
