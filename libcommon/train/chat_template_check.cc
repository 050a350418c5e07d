// Resolving data.chat_template and comparing it with what each dataset recorded when it was preprocessed.
#include "train/chat_template_check.h"

#include <filesystem>

#include "core/error.h"
#include "data/chat_template_identity.h"
#include "train/train_config.h"

namespace veomni {

namespace {

// The tokenizer.json whose folder "model" looks in: model.tokenizer_path's, else the model config's directory.
std::string tokenizer_json(const TrainConfig& config) {
  namespace fs = std::filesystem;
  const fs::path folder = !config.model.tokenizer_path.empty() ? fs::path(config.model.tokenizer_path)
                          : fs::is_directory(config.resolved_model_config_path())
                              ? fs::path(config.resolved_model_config_path())
                              : fs::path(config.resolved_model_config_path()).parent_path();
  return (folder / "tokenizer.json").string();
}

std::string describe(const std::string& identity) {
  if (identity == kChatmlIdentity) return "our built-in ChatML (chatml)";
  return "the Jinja template with " + identity.substr(identity.find(' ') + 1);
}

}  // namespace

ChatTemplateExpectation expected_chat_template(const TrainConfig& config) {
  ChatTemplateExpectation expected;
  expected.spec = config.data.chat_template;
  if (!expected.enabled()) return expected;
  try {
    // The tokenizer folder is only consulted for "model"; a path is read as given.
    expected.identity = chat_template_identity(expected.spec, tokenizer_json(config));
  } catch (const InputError& e) {
    throw InputError(fmt::format("data.chat_template '{}': {}", expected.spec, e.what()));
  }
  return expected;
}

void check_dataset_chat_template(const ChatTemplateExpectation& expected, const std::string& config_key,
                                 const std::string& path, const DatasetInfo& info) {
  if (!expected.enabled() || info.chat_template == expected.identity) return;
  VEOMNI_INPUT_CHECK(!info.chat_template.empty(),
                     "{} ({}) does not record the chat template it was rendered with (written before datasets "
                     "recorded it), so data.chat_template '{}' cannot be checked (hint: preprocess it again, or leave "
                     "data.chat_template empty)",
                     path, config_key, expected.spec);
  VEOMNI_INPUT_CHECK(info.chat_template != kNoChatTemplateIdentity,
                     "{} ({}) holds samples that no chat template rendered ({}), but data.chat_template is '{}' "
                     "(hint: leave data.chat_template empty for generated or pre-tokenized data)",
                     path, config_key, info.producer, expected.spec);
  throw InputError(fmt::format(
      "{} ({}) was rendered with {}, but data.chat_template '{}' is {} (hint: preprocess it with veomni-preprocess "
      "--chat-template {}, or set data.chat_template to the template it was made with)",
      path, config_key, describe(info.chat_template), expected.spec, describe(expected.identity), expected.spec));
}

}  // namespace veomni
