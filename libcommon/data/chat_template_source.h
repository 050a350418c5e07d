// Where a model's own chat template comes from: chat_template.jinja, chat_template.json or tokenizer_config.json
// beside the tokenizer (as transformers loads them), or a .jinja file given by path; and the special tokens the
// template sees.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace veomni {

struct ChatTemplateSource {
  std::string text;                // the Jinja source
  std::string origin;              // the file it came from, for messages
  nlohmann::ordered_json globals;  // bos_token, eos_token, ... (those tokenizer_config.json sets), as transformers
};

// `spec` "model": the template of the tokenizer's folder, looked up in chat_template.jinja, then chat_template.json
// ({"chat_template": ...}), then tokenizer_config.json's "chat_template" (a string, or a list of {name, template}
// whose "default" is taken). Otherwise `spec` is a path: a .jinja file, or a JSON file holding "chat_template".
// The special tokens come from tokenizer_config.json beside the tokenizer when it exists. InputError naming the
// files looked at when no template is found.
ChatTemplateSource load_chat_template(const std::string& spec, const std::string& tokenizer_path);

}  // namespace veomni
