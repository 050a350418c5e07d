// Preference pairs through the model's own chat template: both conversations of each record rendered by the chat
// template worker, the answers' assistant text the only targets.
#pragma once
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "data/chat_template_worker.h"
#include "data/text_preprocess_input.h"
#include "data/text_preprocess_pair.h"
#include "data/tokenizer.h"

namespace veomni {

// veomni-preprocess preference with --chat-template model or a file: the records of a block go to the worker in one
// request (two conversations a record). A conversation is the prompt's messages then one answer's, as
// PairEncoder::encode_record reads them (the same checks and messages); the assistant messages of the prompt are
// rendered but not trained.
class PreferenceTemplateEncoder {
 public:
  PreferenceTemplateEncoder(const Tokenizer& tokenizer, ChatTemplateWorker& worker, PairOptions options,
                            nlohmann::ordered_json kwargs);

  // One result per record of the block, as PairEncoder's (Bad with the reason for a bad record, a template error
  // among them). InputError when the worker fails as a whole.
  std::vector<PairResult> encode_block(std::span<const RecordRef> block, const RecordReader& reader, int threads);

 private:
  const Tokenizer& tokenizer_;
  ChatTemplateWorker& worker_;
  PairOptions options_;
  nlohmann::ordered_json kwargs_;
};

}  // namespace veomni
