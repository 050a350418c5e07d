// What a dataset records of the chat template its conversations were rendered with, so that a run can check it
// trains on the template it expects (data.chat_template).
#pragma once
#include <string>

namespace veomni {

// Our built-in ChatML rendering.
inline constexpr const char* kChatmlIdentity = "chatml";
// Datasets of generated or pre-tokenized samples: no conversation was rendered.
inline constexpr const char* kNoChatTemplateIdentity = "none";

// A Jinja template's identity: "jinja sha256:<hex of its source>", the same whichever file it was read from.
std::string jinja_template_identity(const std::string& template_text);

// The identity a --chat-template / data.chat_template value names: "chatml", or the Jinja template that "model" (the
// tokenizer folder's own) or a file path resolves to (InputError when none is found, as when preprocessing).
std::string chat_template_identity(const std::string& spec, const std::string& tokenizer_path);

}  // namespace veomni
