// Finding and reading a model's chat template and its special tokens.
#include "data/chat_template_source.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/json_file.h"

namespace veomni {

namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  VEOMNI_INPUT_CHECK(in, "cannot read the chat template file {}", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

ojson read_json(const fs::path& path) { return parse_ordered_json(read_text(path), path.string()); }

// A "chat_template" value: a string, or a list of {name, template} (transformers' named templates).
std::string template_of(const ojson& value, const fs::path& path) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array())
    for (const ojson& named : value)
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
          named["template"].is_string())
        return named["template"].get<std::string>();
  throw InputError(fmt::format("{}: \"chat_template\" is neither a string nor a list with a \"default\" template",
                               path.string()));
}

std::string template_in_json(const fs::path& path) {
  const ojson config = read_json(path);
  VEOMNI_INPUT_CHECK(config.is_object() && config.contains("chat_template"), "{} has no \"chat_template\"",
                     path.string());
  return template_of(config["chat_template"], path);
}

// The string-valued special tokens transformers hands every template (its special_tokens_map).
ojson special_tokens(const fs::path& config_path) {
  ojson globals = ojson::object();
  if (!fs::exists(config_path)) return globals;
  const ojson config = read_json(config_path);
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (!config.contains(key)) continue;
    const ojson& token = config[key];
    if (token.is_string())
      globals[key] = token;
    else if (token.is_object() && token.contains("content") && token["content"].is_string())
      globals[key] = token["content"];
  }
  return globals;
}

}  // namespace

ChatTemplateSource load_chat_template(const std::string& spec, const std::string& tokenizer_path) {
  const fs::path folder = fs::path(tokenizer_path).parent_path();
  ChatTemplateSource source;
  source.globals = special_tokens(folder / "tokenizer_config.json");
  if (spec != "model") {
    const fs::path path(spec);
    VEOMNI_INPUT_CHECK(fs::is_regular_file(path),
                       "--chat-template {}: no such file (expected chatml, model or a .jinja file)", spec);
    source.origin = path.string();
    source.text = path.extension() == ".json" ? template_in_json(path) : read_text(path);
    return source;
  }
  const fs::path jinja = folder / "chat_template.jinja";
  const fs::path processor = folder / "chat_template.json";
  const fs::path config = folder / "tokenizer_config.json";
  if (fs::exists(jinja)) {
    source.origin = jinja.string();
    source.text = read_text(jinja);
  } else if (fs::exists(processor)) {
    source.origin = processor.string();
    source.text = template_in_json(processor);
  } else if (fs::exists(config) && read_json(config).contains("chat_template")) {
    source.origin = config.string();
    source.text = template_of(read_json(config)["chat_template"], config);
  } else {
    throw InputError(fmt::format(
        "--chat-template model: the tokenizer's folder {} has no chat template (looked for chat_template.jinja, "
        "chat_template.json and \"chat_template\" in tokenizer_config.json); give a .jinja file instead",
        folder.string()));
  }
  return source;
}

}  // namespace veomni
