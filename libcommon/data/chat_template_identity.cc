// Chat-template identities: the built-in ChatML, or the SHA-256 of a Jinja template's source.
#include "data/chat_template_identity.h"

#include "data/chat_template_source.h"
#include "data/tokenizer_sha256.h"

namespace veomni {

std::string jinja_template_identity(const std::string& template_text) {
  return "jinja sha256:" + sha256_hex(template_text);
}

std::string chat_template_identity(const std::string& spec, const std::string& tokenizer_path) {
  if (spec == kChatmlIdentity) return kChatmlIdentity;
  return jinja_template_identity(load_chat_template(spec, tokenizer_path).text);
}

}  // namespace veomni
