// The tokenize and text pipelines: blocks of records tokenized in parallel, progress, counts, dataset writing.
#include "data/text_preprocess.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/chat_template_identity.h"
#include "data/chat_template_model.h"
#include "data/chat_template_source.h"
#include "data/chat_template_worker.h"
#include "data/dataset_writer.h"
#include "data/text_preprocess_input.h"
#include "data/text_preprocess_pack.h"
#include "data/text_preprocess_parallel.h"
#include "io/json_file.h"
#include "veomni/version.h"

namespace veomni {

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kBadExamples = 5;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void tally(const EncodedRecord& record, const std::string& location, bool skip_bad, SampleStore& store,
           TextPreprocessSummary& summary) {
  switch (record.status) {
    case RecordStatus::Kept:
      store.add(record.tokens);
      summary.truncated += record.truncated;
      return;
    case RecordStatus::TooLong:
      ++summary.dropped_too_long;
      return;
    case RecordStatus::NoTarget:
      ++summary.dropped_no_target;
      return;
    case RecordStatus::Bad:
      if (!skip_bad)
        throw InputError(fmt::format("{}: {} (--skip-bad counts and skips such records)", location,
                                     quoted_excerpt(record.error, 1000)));
      if (summary.bad_examples.size() < kBadExamples) {
        summary.bad_examples.push_back(location + ": " + quoted_excerpt(record.error, 1000));
        spdlog::warn("skipped {}: {}", location, summary.bad_examples.back().substr(location.size() + 2));
      }
      ++summary.bad;
      return;
  }
}

std::string packing_description(const TextPreprocessOptions& options) {
  if (!options.pack) return "none";
  return fmt::format(
      "best-fit decreasing into rows of {} tokens; position_ids restart at every sample; padding "
      "<|endoftext|> with label -100 and attention_mask 0",
      options.record.max_seq_len);
}

void write_dataset(const TextPreprocessOptions& options, const Tokenizer& tokenizer, const SampleStore& store,
                   TextPreprocessSummary& summary) {
  DatasetInfo info;
  info.kind = "text";
  info.producer = "veomni-preprocess";
  info.producer_version = VEOMNI_VERSION_STRING;
  info.packing = packing_description(options);
  info.max_seq_len = options.record.max_seq_len;
  info.tokenizer = tokenizer.fingerprint();
  info.chat_template = chat_template_identity(options.chat_template, options.tokenizer_path);
  info.chat_template_kwargs = options.chat_template_kwargs.dump();
  DatasetWriterOptions writer_options;
  writer_options.compression_level = options.compression_level;

  std::vector<std::vector<int64_t>> rows;
  if (options.pack) rows = pack_best_fit(store, options.record.max_seq_len);
  const int64_t count = options.pack ? static_cast<int64_t>(rows.size()) : store.size();
  VEOMNI_INPUT_CHECK(options.num_shards <= count, "--num-shards {} is more than the {} samples to write",
                     options.num_shards, count);
  ShardedDatasetWriter writer(options.out, count, options.num_shards, info, writer_options);
  const int32_t pad_id = tokenizer.require_token_id("<|endoftext|>");
  for (int64_t i = 0; i < count; ++i) {
    if (options.pack)
      writer.append(store.packed_row(rows[static_cast<size_t>(i)], options.record.max_seq_len, pad_id));
    else
      writer.append(store.sample(i));
  }
  writer.close();
  summary.rows = count;
  summary.padding_tokens = options.pack ? count * options.record.max_seq_len - store.total_tokens() : 0;
  summary.files = writer.paths();
  for (const std::string& file : summary.files) summary.output_bytes += std::filesystem::file_size(file);
}

}  // namespace

TokenizeSummary tokenize_records(const TokenizeOptions& options, std::FILE* out) {
  const auto start = Clock::now();
  const Tokenizer tokenizer = Tokenizer::from_file(options.tokenizer_path);
  const int threads = resolve_threads(options.threads);
  RecordReader reader(options.inputs, RecordReader::kDefaultBlockBytes, options.max_line_bytes);
  RecordProgress progress(reader);
  TokenizeSummary summary;
  std::vector<RecordRef> block;
  std::vector<std::string> lines, errors;
  std::vector<int64_t> counts;
  while (reader.next_block(block)) {
    lines.assign(block.size(), {});
    errors.assign(block.size(), {});
    counts.assign(block.size(), 0);
    parallel_for(block.size(), threads, [&](size_t i) {
      try {
        const nlohmann::json record = block[i].value ? *block[i].value : parse_record_line(block[i].line);
        VEOMNI_INPUT_CHECK(
            record.is_object() && record.contains(options.text_key) && record[options.text_key].is_string(),
            "expected an object with a string \"{}\"", options.text_key);
        const std::vector<int32_t> ids = tokenizer.encode(record[options.text_key].get_ref<const std::string&>());
        counts[i] = static_cast<int64_t>(ids.size());
        lines[i] = nlohmann::json(ids).dump();
      } catch (const InputError& e) {
        errors[i] = e.what();
      }
    });
    for (size_t i = 0; i < block.size(); ++i) {
      VEOMNI_INPUT_CHECK(errors[i].empty(), "{}: {}", reader.location(block[i]), quoted_excerpt(errors[i], 1000));
      std::fputs(lines[i].c_str(), out);
      std::fputc('\n', out);
      summary.tokens += counts[i];
    }
    summary.records += static_cast<int64_t>(block.size());
    progress.update(summary.records, summary.records);
  }
  check_no_empty_input(reader, false);
  VEOMNI_INPUT_CHECK(std::fflush(out) == 0, "cannot write the ids to the output");
  summary.input_bytes = reader.bytes_read();
  summary.seconds = seconds_since(start);
  return summary;
}

TextPreprocessSummary preprocess_text(const TextPreprocessOptions& options) {
  const auto start = Clock::now();
  VEOMNI_INPUT_CHECK(!options.pack || options.record.max_seq_len > 0, "--pack needs --max-seq-len (the row length)");
  VEOMNI_INPUT_CHECK(options.num_shards >= 1, "--num-shards must be at least 1, got {}", options.num_shards);
  const Tokenizer tokenizer = Tokenizer::from_file(options.tokenizer_path);
  const RecordEncoder encoder(tokenizer, options.record);
  const int threads = resolve_threads(options.threads);
  spdlog::info("tokenizer {} ({} ids), {} thread(s)", tokenizer.fingerprint(), tokenizer.id_limit(), threads);

  std::unique_ptr<ChatTemplateWorker> worker;
  std::unique_ptr<ModelTemplateEncoder> model_encoder;
  if (options.chat_template != "chatml") {
    const ChatTemplateSource source = load_chat_template(options.chat_template, options.tokenizer_path);
    worker = std::make_unique<ChatTemplateWorker>(default_chat_template_worker_paths(), source.text, source.globals);
    model_encoder = std::make_unique<ModelTemplateEncoder>(
        tokenizer, encoder, *worker,
        ModelTemplateOptions{.system_prompt = options.record.system_prompt, .kwargs = options.chat_template_kwargs});
    spdlog::info("chat template {} ({})", source.origin,
                 worker->has_generation_blocks() ? "assistant text from its {% generation %} blocks"
                                                 : "assistant text from renderings of prefixes");
  }

  RecordReader reader(options.inputs, RecordReader::kDefaultBlockBytes, options.max_line_bytes);
  RecordProgress progress(reader);
  TextPreprocessSummary summary;
  summary.tokenizer = tokenizer.fingerprint();
  // Tokenized samples beyond the buffer wait in a temporary file beside the output, so memory does not grow with
  // the input's tokens; the dataset is written from there once the sample count (the shards' split) is known.
  SampleStore store(std::filesystem::absolute(options.out).parent_path().string(), options.buffer_bytes);
  std::vector<RecordRef> block;
  std::vector<EncodedRecord> results;
  while (reader.next_block(block)) {
    if (model_encoder) {
      results = model_encoder->encode_block(block, reader, threads);
    } else {
      results.assign(block.size(), {});
      parallel_for(block.size(), threads, [&](size_t i) {
        results[i] = block[i].value ? encoder.encode_value(*block[i].value) : encoder.encode_line(block[i].line);
      });
    }
    for (size_t i = 0; i < block.size(); ++i)
      tally(results[i], reader.location(block[i]), options.skip_bad, store, summary);
    summary.records += static_cast<int64_t>(block.size());
    progress.update(summary.records, store.size());
  }
  check_no_empty_input(reader, options.skip_bad);
  summary.samples = store.size();
  summary.tokens = store.total_tokens();
  summary.trained_tokens = store.trained_tokens();
  summary.input_bytes = reader.bytes_read();
  VEOMNI_INPUT_CHECK(store.size() > 0,
                     "no sample to write: {} record(s) read, {} bad, {} too long, {} without an assistant token",
                     summary.records, summary.bad, summary.dropped_too_long, summary.dropped_no_target);
  spdlog::info("tokenized {} records in {:.1f} s; writing {}", summary.records, seconds_since(start), options.out);
  write_dataset(options, tokenizer, store, summary);
  summary.seconds = seconds_since(start);
  return summary;
}

}  // namespace veomni
