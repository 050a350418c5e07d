// The multimodal pipeline: records in blocks, media decoded on all threads, samples streamed into the dataset.
#include "media/multimodal_preprocess.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>

#include "core/error.h"
#include "data/chat_template_conversation.h"
#include "data/chat_template_identity.h"
#include "data/chat_template_model.h"
#include "data/chat_template_source.h"
#include "data/chat_template_worker.h"
#include "data/dataset_writer.h"
#include "data/text_preprocess_input.h"
#include "data/text_preprocess_parallel.h"
#include "data/text_preprocess_record.h"
#include "data/dataset_objective_keys.h"
#include "media/multimodal_preference.h"
#include "media/multimodal_sample.h"
#include "veomni/version.h"

namespace veomni {

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kBadExamples = 5;
// Records decoded together per thread: enough to balance uneven media, few enough to bound memory.
constexpr size_t kRecordsPerThread = 4;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

enum class Outcome { Kept, TooLong, NoTarget, Bad };

struct RecordResult {
  Outcome outcome = Outcome::Bad;
  EncodedMultimodal encoded;
  std::string error;
};

std::string media_dir_for(const MultimodalPreprocessOptions& options, const std::string& input) {
  if (!options.media_root.empty()) return options.media_root;
  if (input == "-") return "";
  return std::filesystem::path(input).parent_path().string();
}

// The conversation encoder or, for preference data, the pair encoder.
struct Encoders {
  const MultimodalEncoder& conversation;
  const MultimodalPairEncoder& pair;
  bool preference = false;
};

// A record's text from the model's chat template: the rendering, or why there is none.
struct RecordRendering {
  std::optional<ModelRendering> rendering;
  std::string error;
};

// The records of a batch through the chat-template worker, in one request. A record that is not a conversation or
// that the template fails on gets its error; the worker failing as a whole is an InputError naming the records.
std::vector<RecordRendering> render_batch(ChatTemplateWorker& worker, std::span<const RecordRef> refs,
                                          const RecordReader& reader, const MultimodalPreprocessOptions& options) {
  std::vector<RecordRendering> out(refs.size());
  std::vector<std::optional<Conversation>> conversations(refs.size());
  nlohmann::ordered_json request = {{"conversations", nlohmann::ordered_json::array()}};
  std::vector<size_t> order;
  for (size_t i = 0; i < refs.size(); ++i) {
    try {
      // Key order matters to the template (tools | tojson): read the line keeping it.
      const nlohmann::ordered_json record =
          nlohmann::ordered_json::parse(refs[i].value ? refs[i].value->dump() : refs[i].line, nullptr, false);
      if (record.is_discarded()) parse_record_line(refs[i].line);  // throws the reader's error naming the problem
      conversations[i] = conversation_from_record(record, options.system_prompt, options.chat_template_kwargs);
      request["conversations"].push_back(render_request(*conversations[i], worker.has_generation_blocks()));
      order.push_back(i);
    } catch (const InputError& e) {
      out[i].error = e.what();
    }
  }
  if (order.empty()) return out;
  const std::string what = fmt::format("the records from {} to {}", reader.location(refs[order.front()]),
                                       reader.location(refs[order.back()]));
  const nlohmann::ordered_json reply = worker.exchange(request, what);
  VEOMNI_CHECK(reply.contains("results") && reply["results"].is_array() && reply["results"].size() == order.size(),
               "the chat template worker answered {} for {} conversations", reply.dump().substr(0, 200),
               order.size());
  for (size_t j = 0; j < order.size(); ++j) {
    const size_t i = order[j];
    try {
      out[i].rendering = rendering_from_result(*conversations[i], reply["results"][j], worker.has_generation_blocks());
    } catch (const InputError& e) {
      out[i].error = e.what();
    }
  }
  return out;
}

RecordResult encode_record(const Encoders& encoders, const RecordRef& ref, const std::string& media_dir,
                           const MultimodalPreprocessOptions& options, const RecordRendering* rendered) {
  RecordResult result;
  if (rendered && !rendered->rendering) {
    result.error = rendered->error;
    return result;
  }
  try {
    const nlohmann::json record = ref.value ? *ref.value : parse_record_line(ref.line);
    result.encoded = encoders.preference ? encoders.pair.encode(record, media_dir)
                                         : encoders.conversation.encode(
                                               record, media_dir, rendered ? &*rendered->rendering : nullptr);
  } catch (const InputError& e) {
    result.error = e.what();
    return result;
  }
  if (options.max_seq_len > 0 && result.encoded.length > options.max_seq_len) {
    result.outcome = Outcome::TooLong;
    result.error = fmt::format("{} tokens, more than --max-seq-len {} (media blocks cannot be truncated)",
                               result.encoded.length, options.max_seq_len);
  } else {
    result.outcome = result.encoded.trained > 0 ? Outcome::Kept : Outcome::NoTarget;
  }
  if (result.outcome != Outcome::Kept) result.encoded.sample.clear();
  return result;
}

// Every pair carries reference log-probs or none: the first kept pair sets the rule; a record breaking it is bad.
void check_ref_logps(RecordResult& result, const MultimodalPreprocessOptions& options,
                     MultimodalPreprocessSummary& summary) {
  if (!options.preference || result.outcome != Outcome::Kept) return;
  const bool has = result.encoded.sample.count(kRefChosenLogpsKey) > 0;
  if (summary.samples == 0) summary.ref_logps = has;
  if (has == summary.ref_logps) return;
  result.outcome = Outcome::Bad;
  result.error = has ? "the record has \"ref_chosen_logps\" and \"ref_rejected_logps\" but earlier pairs have none "
                       "(every pair carries them or none does)"
                     : "the record has no \"ref_chosen_logps\" / \"ref_rejected_logps\" but earlier pairs have "
                       "them (every pair carries them or none does)";
}

void tally(RecordResult& result, const std::string& location, const MultimodalPreprocessOptions& options,
           DatasetWriter& writer, MultimodalPreprocessSummary& summary) {
  check_ref_logps(result, options, summary);
  switch (result.outcome) {
    case Outcome::Kept:
      writer.append(result.encoded.sample);
      ++summary.samples;
      summary.images += result.encoded.images;
      summary.videos += result.encoded.videos;
      summary.audio_clips += result.encoded.audio_clips;
      summary.tokens += result.encoded.length;
      summary.trained_tokens += result.encoded.trained;
      return;
    case Outcome::TooLong:
      VEOMNI_INPUT_CHECK(!options.error_on_too_long, "{}: {}", location, result.error);
      ++summary.dropped_too_long;
      return;
    case Outcome::NoTarget: ++summary.dropped_no_target; return;
    case Outcome::Bad:
      if (!options.skip_bad)
        throw InputError(fmt::format("{}: {} (--skip-bad counts and skips such records)", location, result.error));
      if (summary.bad_examples.size() < kBadExamples) {
        summary.bad_examples.push_back(location + ": " + result.error);
        spdlog::warn("skipped {}: {}", location, result.error);
      }
      ++summary.bad;
      return;
  }
}

DatasetInfo dataset_info(const MultimodalPreprocessOptions& options, const Tokenizer& tokenizer) {
  DatasetInfo info;
  info.kind = options.model == MultimodalModel::Qwen3VL ? "vl" : "omni";
  info.producer = "veomni-preprocess";
  info.producer_version = VEOMNI_VERSION_STRING;
  info.max_seq_len = options.max_seq_len;
  info.tokenizer = tokenizer.fingerprint();
  info.chat_template = chat_template_identity(options.chat_template, options.tokenizer_path);
  info.chat_template_kwargs = options.chat_template_kwargs.dump();
  if (options.preference)
    info.packing = "preference pairs: chosen then rejected in one sample, each holding the prompt's media, "
                   "position_ids restarting at the rejected";
  return info;
}

}  // namespace

MultimodalPreprocessSummary preprocess_multimodal(const MultimodalPreprocessOptions& options) {
  const auto start = Clock::now();
  VEOMNI_INPUT_CHECK(!options.inputs.empty(), "no --input given");
  const Tokenizer tokenizer = Tokenizer::from_file(options.tokenizer_path);
  const MultimodalMediaConfig config = options.processor_config.empty()
                                           ? default_media_config(options.model)
                                           : media_config_from_json(options.processor_config, options.model);
  const MultimodalEncoder encoder(tokenizer, config, options.system_prompt);
  const MultimodalPairEncoder pair_encoder(tokenizer, config, options.system_prompt);
  const Encoders encoders{encoder, pair_encoder, options.preference};
  const int threads = resolve_threads(options.threads);
  std::unique_ptr<ChatTemplateWorker> worker;
  if (options.chat_template != "chatml") {
    VEOMNI_INPUT_CHECK(!options.preference,
                       "--chat-template {} with --model-type: multimodal preference pairs use our ChatML only (text "
                       "pairs take the model's template)",
                       options.chat_template);
    const ChatTemplateSource source = load_chat_template(options.chat_template, options.tokenizer_path);
    worker = std::make_unique<ChatTemplateWorker>(default_chat_template_worker_paths(), source.text, source.globals);
    spdlog::info("chat template from {} ({})", source.origin,
                 worker->has_generation_blocks() ? "assistant text from its {% generation %} blocks"
                                                  : "assistant text from renderings of each turn's prefix");
  }
  MultimodalPreprocessSummary summary;
  summary.tokenizer = tokenizer.fingerprint();
  summary.audio_ids_from_tokenizer = encoder.chat().ids().audio_from_tokenizer;
  if (options.model == MultimodalModel::Qwen3OmniMoe && !summary.audio_ids_from_tokenizer)
    spdlog::warn("{} has no <|audio_start|>/<|audio_end|>/<|audio_pad|>: using Qwen3-Omni's ids {}/{}/{}",
                 tokenizer.source(), encoder.chat().ids().audio_start, encoder.chat().ids().audio_end,
                 encoder.chat().ids().audio_pad);
  spdlog::info("{} preprocessing with {} ({} ids), {} thread(s)", multimodal_model_name(options.model),
               tokenizer.fingerprint(), tokenizer.id_limit(), threads);

  summary.setup_seconds = seconds_since(start);
  DatasetWriterOptions writer_options;
  writer_options.compression_level = options.compression_level;
  DatasetWriter writer(options.out, dataset_info(options, tokenizer), writer_options);
  RecordReader reader(options.inputs, RecordReader::kDefaultBlockBytes, options.max_line_bytes);
  RecordProgress progress(reader);
  std::vector<RecordRef> block;
  std::vector<RecordResult> results;
  const size_t batch = static_cast<size_t>(threads) * kRecordsPerThread;
  while (reader.next_block(block)) {
    for (size_t first = 0; first < block.size(); first += batch) {
      const size_t count = std::min(batch, block.size() - first);
      results.assign(count, {});
      const std::vector<RecordRendering> rendered =
          worker ? render_batch(*worker, std::span(block).subspan(first, count), reader, options)
                 : std::vector<RecordRendering>{};
      parallel_for(count, threads, [&](size_t i) {
        const RecordRef& ref = block[first + i];
        results[i] = encode_record(encoders, ref, media_dir_for(options, reader.path(ref.file)), options,
                                   worker ? &rendered[i] : nullptr);
      });
      for (size_t i = 0; i < count; ++i)
        tally(results[i], reader.location(block[first + i]), options, writer, summary);
      summary.records += static_cast<int64_t>(count);
      progress.update(summary.records, summary.samples);
    }
  }
  VEOMNI_INPUT_CHECK(summary.samples > 0,
                     "no sample to write: {} record(s) read, {} bad, {} too long, {} without an assistant token",
                     summary.records, summary.bad, summary.dropped_too_long, summary.dropped_no_target);
  summary.keys = writer.keys();
  writer.close();
  summary.file = options.out;
  summary.output_bytes = std::filesystem::file_size(options.out);
  summary.seconds = seconds_since(start);
  return summary;
}

}  // namespace veomni
