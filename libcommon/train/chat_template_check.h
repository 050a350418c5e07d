// data.chat_template: every dataset of a run must have been rendered with the chat template the config names.
#pragma once
#include <string>

#include "data/dataset_format.h"

namespace veomni {

struct TrainConfig;

// What data.chat_template asks for, resolved once: the spec as written and the identity it names
// (data/chat_template_identity.h). An empty spec checks nothing.
struct ChatTemplateExpectation {
  std::string spec;
  std::string identity;
  bool enabled() const { return !spec.empty(); }
};

// Resolves data.chat_template: "model" reads the template beside the tokenizer (model.tokenizer_path, else the
// model config's directory). InputError naming data.chat_template when the template cannot be found.
ChatTemplateExpectation expected_chat_template(const TrainConfig& config);

// InputError naming the file and its config key (data.train_path, data.datasets[i], data.eval_path) when the
// dataset's recorded template differs from the expected one, or when it records none (older files, generated data).
void check_dataset_chat_template(const ChatTemplateExpectation& expected, const std::string& config_key,
                                 const std::string& path, const DatasetInfo& info);

}  // namespace veomni
