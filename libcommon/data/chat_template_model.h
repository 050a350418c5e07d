// Conversations through the model's own chat template: the renders each needs, which bytes of the rendering are the
// assistant's (from {% generation %} blocks or from renderings of prefixes, as TRL does), and the labelled ids.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/chat_template.h"
#include "data/chat_template_conversation.h"
#include "data/chat_template_worker.h"
#include "data/text_preprocess_input.h"
#include "data/text_preprocess_record.h"
#include "data/tokenizer.h"

namespace veomni {

struct ByteSpan {
  size_t begin = 0, end = 0;
  bool operator==(const ByteSpan&) const = default;
};

// The worker's request for one conversation: render 0 is the whole conversation; without generation blocks, then
// for each assistant message k, messages[:k] with the generation prompt and messages[:k+1] without it.
nlohmann::ordered_json render_request(const Conversation& conversation, bool generation_blocks);

// The assistant spans of the whole rendering texts[0], from the prefix renderings of render_request. Assistant
// message k starts where the rendering of messages[:k] with the generation prompt leaves the whole rendering, and
// ends where the rendering of messages[:k+1] does; when that rendering is not a prefix (Qwen3 drops the thinking of
// earlier turns), the turn ends where the longest tail of it that the whole rendering continues with at their first
// difference ends. Whitespace closing a turn ("\n" after <|im_end|>) is not the assistant's. InputError when the
// spans are empty or out of order (a template whose prefixes render too differently).
std::vector<ByteSpan> assistant_spans_from_prefixes(const Conversation& conversation,
                                                    std::span<const std::string> texts);

// The ids of `text` with the bytes in `spans` trained. The pieces between span boundaries are tokenized one by one;
// InputError when their ids differ from those of the whole text (a boundary inside a token).
LabeledTokens label_rendering(const std::string& text, std::span<const ByteSpan> spans, const Tokenizer& tokenizer);

// The whole rendering of a conversation and the bytes of it that are the assistant's.
struct ModelRendering {
  std::string text;
  std::vector<ByteSpan> spans;
};

// The rendering in the worker's answer `result` for the request render_request(conversation, generation_blocks):
// spans from its {% generation %} blocks, else from its prefix renderings. InputError with the template's message
// when it failed on this conversation.
ModelRendering rendering_from_result(const Conversation& conversation, const nlohmann::ordered_json& result,
                                     bool generation_blocks);

// Where the records `order` (indices into block, in order, not empty) of one worker request come from, for its errors:
// "file:line" or "the records from file:line to file:line".
std::string records_location(std::span<const RecordRef> block, const std::vector<size_t>& order,
                             const RecordReader& reader);

struct ModelTemplateOptions {
  std::optional<std::string> system_prompt;
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // --chat-template-kwargs
};

// veomni-preprocess text with --chat-template model: conversation records go through the worker in one request per
// block; plain-text records go to `plain` as before.
class ModelTemplateEncoder {
 public:
  ModelTemplateEncoder(const Tokenizer& tokenizer, const RecordEncoder& plain, ChatTemplateWorker& worker,
                       ModelTemplateOptions options);

  // One result per record of the block, as RecordEncoder's (Bad with the reason for a bad record, a template
  // error among them). InputError when the worker fails as a whole.
  std::vector<EncodedRecord> encode_block(std::span<const RecordRef> block, const RecordReader& reader,
                                          int threads);

 private:
  const Tokenizer& tokenizer_;
  const RecordEncoder& plain_;
  ChatTemplateWorker& worker_;
  ModelTemplateOptions options_;
};

}  // namespace veomni
