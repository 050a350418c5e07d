// Pairs rendered by the model's chat template: the records' two conversations, one worker request a block, and the
// answers' spans of each rendering as the targets.
#include "data/text_preprocess_preference_template.h"

#include <optional>
#include <string>
#include <utility>

#include "core/error.h"
#include "data/chat_template_conversation.h"
#include "data/chat_template_model.h"
#include "data/text_preprocess_parallel.h"
#include "data/text_preprocess_record.h"

namespace veomni {

namespace {

using ojson = nlohmann::ordered_json;

// A pair waiting for its renderings: its two conversations and how many assistant messages lead each (the prompt's).
struct PendingPair {
  Conversation chosen, rejected;
  size_t prompt_assistants = 0;
  EncodedPair pair;  // the reference log-probs so far
};

size_t assistants_before(const Conversation& conversation, size_t message) {
  size_t count = 0;
  for (const size_t k : conversation.assistant) count += k < message ? 1 : 0;
  return count;
}

// The conversation of the prompt's messages followed by `answer_key`'s: the record's tools and template variables
// travel with it.
Conversation side_conversation(const ojson& record, const char* answer_key, const std::optional<std::string>& system,
                               const ojson& kwargs) {
  ojson messages = ojson::array();
  if (record.contains("prompt") && !record["prompt"].is_string())
    for (const ojson& m : record["prompt"]) messages.push_back(m);
  for (const ojson& m : record[answer_key]) messages.push_back(m);
  ojson conversation = {{"messages", std::move(messages)}};
  for (const char* key : {"tools", "chat_template_kwargs"})
    if (record.contains(key)) conversation[key] = record[key];
  return conversation_from_record(conversation, system, kwargs);
}

PendingPair pending_pair(const RecordRef& ref, const std::optional<std::string>& system, const ojson& kwargs) {
  const nlohmann::json record = ref.value ? *ref.value : parse_record_line(ref.line);
  // The checks (and messages) of the built-in template first: a layout problem reads the same either way.
  const size_t prompt_messages = pair_prompt_messages(record, system);
  PendingPair pending;
  read_pair_ref_logps(record, pending.pair);
  // Key order matters to the template (tools | tojson): read the record again keeping it.
  const ojson ordered = ref.value ? ojson::parse(ref.value->dump()) : ojson::parse(ref.line);
  pending.chosen = side_conversation(ordered, "chosen", system, kwargs);
  pending.rejected = side_conversation(ordered, "rejected", system, kwargs);
  pending.prompt_assistants = assistants_before(pending.chosen, prompt_messages);
  return pending;
}

// The labelled ids of one side: the rendering's assistant spans after the prompt's are the targets.
LabeledTokens label_side(const Conversation& conversation, const ojson& result, bool generation_blocks,
                         size_t prompt_assistants, const Tokenizer& tokenizer) {
  ModelRendering rendering = rendering_from_result(conversation, result, generation_blocks);
  VEOMNI_INPUT_CHECK(rendering.spans.size() == conversation.assistant.size(),
                     "the chat template marks {} {{% generation %}} block(s) in a conversation of {} assistant "
                     "message(s); preference pairs need one block per assistant message",
                     rendering.spans.size(), conversation.assistant.size());
  rendering.spans.erase(rendering.spans.begin(),
                        rendering.spans.begin() + static_cast<std::ptrdiff_t>(prompt_assistants));
  return label_rendering(rendering.text, rendering.spans, tokenizer);
}

}  // namespace

PreferenceTemplateEncoder::PreferenceTemplateEncoder(const Tokenizer& tokenizer, ChatTemplateWorker& worker,
                                                     PairOptions options, ojson kwargs)
    : tokenizer_(tokenizer), worker_(worker), options_(std::move(options)), kwargs_(std::move(kwargs)) {}

std::vector<PairResult> PreferenceTemplateEncoder::encode_block(std::span<const RecordRef> block,
                                                                const RecordReader& reader, int threads) {
  const size_t n = block.size();
  std::vector<PairResult> results(n);
  std::vector<std::optional<PendingPair>> pending(n);
  parallel_for(n, threads, [&](size_t i) {
    try {
      pending[i] = pending_pair(block[i], options_.system_prompt, kwargs_);
    } catch (const InputError& e) {
      results[i] = PairResult{.status = PairStatus::Bad, .error = e.what()};
    }
  });
  std::vector<size_t> order;
  ojson request = {{"conversations", ojson::array()}};
  const bool blocks = worker_.has_generation_blocks();
  for (size_t i = 0; i < n; ++i)
    if (pending[i]) {
      order.push_back(i);
      request["conversations"].push_back(render_request(pending[i]->chosen, blocks));
      request["conversations"].push_back(render_request(pending[i]->rejected, blocks));
    }
  if (order.empty()) return results;
  const ojson reply = worker_.exchange(request, records_location(block, order, reader));
  VEOMNI_CHECK(reply.contains("results") && reply["results"].is_array() && reply["results"].size() == 2 * order.size(),
               "the chat template worker answered {} for {} conversations", reply.dump().substr(0, 200),
               2 * order.size());
  parallel_for(order.size(), threads, [&](size_t j) {
    const size_t i = order[j];
    PendingPair& p = *pending[i];
    try {
      p.pair.chosen = label_side(p.chosen, reply["results"][2 * j], blocks, p.prompt_assistants, tokenizer_);
      p.pair.rejected = label_side(p.rejected, reply["results"][2 * j + 1], blocks, p.prompt_assistants, tokenizer_);
      results[i] = pair_result(std::move(p.pair), options_.max_seq_len);
    } catch (const InputError& e) {
      results[i] = PairResult{.status = PairStatus::Bad, .error = e.what()};
    }
  });
  return results;
}

}  // namespace veomni
