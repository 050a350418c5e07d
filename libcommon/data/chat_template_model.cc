// Assistant spans from the model template's renderings, labelled ids, and the block-at-a-time encoder.
#include "data/chat_template_model.h"

#include <algorithm>
#include <set>
#include <utility>

#include "core/error.h"
#include "data/text_preprocess_parallel.h"

namespace veomni {

namespace {

using ojson = nlohmann::ordered_json;

size_t common_prefix(std::string_view a, std::string_view b) {
  const auto [end_a, end_b] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<size_t>(end_a - a.begin());
}

// The largest m with whole[from, from + m) equal to the last m bytes of `turn` (both read from `from` on).
size_t continued_tail(std::string_view whole, std::string_view turn, size_t from) {
  const size_t limit = std::min(whole.size() - from, turn.size() - from);
  for (size_t m = limit; m > 0; --m)
    if (whole.compare(from, m, turn.substr(turn.size() - m)) == 0) return m;
  return 0;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

}  // namespace

ojson render_request(const Conversation& conversation, bool generation_blocks) {
  ojson renders = ojson::array();
  renders.push_back({conversation.messages.size(), false});
  if (!generation_blocks)
    for (const size_t k : conversation.assistant) {
      renders.push_back({k, true});
      renders.push_back({k + 1, false});
    }
  return {{"messages", conversation.messages},
          {"tools", conversation.tools},
          {"kwargs", conversation.kwargs},
          {"renders", renders}};
}

std::vector<ByteSpan> assistant_spans_from_prefixes(const Conversation& conversation,
                                                    std::span<const std::string> texts) {
  VEOMNI_CHECK(texts.size() == 1 + 2 * conversation.assistant.size(), "{} renders for {} assistant messages",
               texts.size(), conversation.assistant.size());
  const std::string_view whole = texts[0];
  std::vector<ByteSpan> spans;
  for (size_t a = 0; a < conversation.assistant.size(); ++a) {
    const std::string_view prompt = texts[1 + 2 * a];
    const std::string_view turn = texts[2 + 2 * a];
    const size_t begin = common_prefix(whole, prompt);
    size_t end = common_prefix(whole, turn);
    if (end < turn.size()) end += continued_tail(whole, turn, end);
    while (end > begin && is_space(whole[end - 1])) --end;
    const size_t k = conversation.assistant[a];
    VEOMNI_INPUT_CHECK(end > begin,
                       "assistant message {}: the chat template renders it to nothing the whole conversation holds "
                       "(its prefixes render differently; a template with {{% generation %}} blocks avoids this)",
                       k);
    VEOMNI_INPUT_CHECK(spans.empty() || begin >= spans.back().end,
                       "assistant message {}: its text overlaps the previous assistant message's in the rendering "
                       "(a template with {{% generation %}} blocks avoids this)",
                       k);
    spans.push_back({begin, end});
  }
  return spans;
}

LabeledTokens label_rendering(const std::string& text, std::span<const ByteSpan> spans, const Tokenizer& tokenizer) {
  std::set<size_t> cuts = {0, text.size()};
  for (const ByteSpan& s : spans) {
    VEOMNI_CHECK(s.begin <= s.end && s.end <= text.size(), "span [{}, {}) of {} bytes", s.begin, s.end, text.size());
    cuts.insert(s.begin);
    cuts.insert(s.end);
  }
  LabeledTokens out;
  for (auto it = cuts.begin(); std::next(it) != cuts.end(); ++it) {
    const size_t begin = *it, end = *std::next(it);
    const bool trained = std::any_of(spans.begin(), spans.end(),
                                     [&](const ByteSpan& s) { return s.begin <= begin && end <= s.end; });
    const std::vector<int32_t> ids = tokenizer.encode(std::string_view(text).substr(begin, end - begin));
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.trained.insert(out.trained.end(), ids.size(), trained ? 1 : 0);
  }
  const std::vector<int32_t> whole = tokenizer.encode(text);
  if (whole != out.ids) {
    const auto [at, unused] = std::mismatch(whole.begin(), whole.end(), out.ids.begin(), out.ids.end());
    const size_t index = static_cast<size_t>(at - whole.begin());
    throw InputError(fmt::format(
        "the rendering tokenizes differently when cut at the assistant turns ({} ids whole, {} in pieces, first "
        "difference at id {}): the template joins an assistant turn to its neighbour inside one token",
        whole.size(), out.ids.size(), index));
  }
  return out;
}

ModelRendering rendering_from_result(const Conversation& conversation, const ojson& result, bool generation_blocks) {
  if (result.contains("error"))
    throw InputError(fmt::format("the chat template failed: {}", result["error"].get<std::string>()));
  std::vector<std::string> texts = result["texts"].get<std::vector<std::string>>();
  ModelRendering rendering;
  if (generation_blocks)
    for (const ojson& s : result["generation"]) rendering.spans.push_back({s[0].get<size_t>(), s[1].get<size_t>()});
  else
    rendering.spans = assistant_spans_from_prefixes(conversation, texts);
  rendering.text = std::move(texts[0]);
  return rendering;
}

std::string records_location(std::span<const RecordRef> block, const std::vector<size_t>& order,
                             const RecordReader& reader) {
  const std::string first = reader.location(block[order.front()]);
  return order.size() == 1 ? first
                           : fmt::format("the records from {} to {}", first, reader.location(block[order.back()]));
}

ModelTemplateEncoder::ModelTemplateEncoder(const Tokenizer& tokenizer, const RecordEncoder& plain,
                                           ChatTemplateWorker& worker, ModelTemplateOptions options)
    : tokenizer_(tokenizer), plain_(plain), worker_(worker), options_(std::move(options)) {}

std::vector<EncodedRecord> ModelTemplateEncoder::encode_block(std::span<const RecordRef> block,
                                                              const RecordReader& reader, int threads) {
  const size_t n = block.size();
  std::vector<EncodedRecord> results(n);
  std::vector<std::optional<Conversation>> conversations(n);
  parallel_for(n, threads, [&](size_t i) {
    try {
      const RecordRef& ref = block[i];
      const nlohmann::json record = ref.value ? *ref.value : parse_record_line(ref.line);
      if (!record.is_object() || !(record.contains("messages") || record.contains("conversations"))) {
        results[i] = plain_.encode_value(record);
        return;
      }
      // Key order matters to the template (tools | tojson): read the line again keeping it.
      const ojson ordered = ref.value ? ojson::parse(ref.value->dump()) : ojson::parse(ref.line);
      conversations[i] = conversation_from_record(ordered, options_.system_prompt, options_.kwargs);
    } catch (const InputError& e) {
      results[i] = EncodedRecord{.status = RecordStatus::Bad, .error = e.what()};
    }
  });
  std::vector<size_t> order;
  ojson request = {{"conversations", ojson::array()}};
  for (size_t i = 0; i < n; ++i)
    if (conversations[i]) {
      order.push_back(i);
      request["conversations"].push_back(render_request(*conversations[i], worker_.has_generation_blocks()));
    }
  if (order.empty()) return results;
  const ojson reply = worker_.exchange(request, records_location(block, order, reader));
  VEOMNI_CHECK(reply.contains("results") && reply["results"].is_array() && reply["results"].size() == order.size(),
               "the chat template worker answered {} for {} conversations", reply.dump().substr(0, 200),
               order.size());
  parallel_for(order.size(), threads, [&](size_t j) {
    const size_t i = order[j];
    const ojson& result = reply["results"][j];
    try {
      const ModelRendering rendering =
          rendering_from_result(*conversations[i], result, worker_.has_generation_blocks());
      results[i] = plain_.finish(label_rendering(rendering.text, rendering.spans, tokenizer_));
    } catch (const InputError& e) {
      results[i] = EncodedRecord{.status = RecordStatus::Bad, .error = e.what()};
    }
  });
  return results;
}

}  // namespace veomni
