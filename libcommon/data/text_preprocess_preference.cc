// The preference pipeline: blocks of records encoded in parallel (built-in ChatML or the model's template), counts,
// the pairs kept in a bounded buffer and spool file, the pair dataset written at the end.
#include "data/text_preprocess_preference.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "data/batch.h"
#include "data/chat_template_identity.h"
#include "data/chat_template_source.h"
#include "data/chat_template_worker.h"
#include "data/dataset_objective_keys.h"
#include "data/dataset_writer.h"
#include "data/text_preprocess_preference_template.h"
#include "data/text_preprocess_pack.h"
#include "data/text_preprocess_parallel.h"
#include "io/json_file.h"
#include "veomni/version.h"

namespace veomni {

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kBadPairExamples = 5;

double pair_seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Ids and target flags of one side written at `at` of the pair's buffers, positions restarting at 0.
void put_side(const LabeledTokens& side, int64_t at, int64_t* ids, int64_t* labels, int64_t* positions) {
  for (int64_t i = 0; i < side.size(); ++i) {
    const auto k = static_cast<size_t>(i);
    ids[at + i] = side.ids[k];
    labels[at + i] = side.trained[k] ? side.ids[k] : kIgnoreIndex;
    positions[at + i] = i;
  }
}

// A kept pair joins the dataset unless its reference log-probs break the rule "every pair or none": the first kept
// pair sets it. Returns the reason when it does not join.
std::string ref_logps_mismatch(const EncodedPair& pair, const PreferencePreprocessSummary& summary) {
  if (summary.pairs == 0 || pair.has_ref_logps == summary.ref_logps) return "";
  return pair.has_ref_logps ? "the record has \"ref_chosen_logps\" and \"ref_rejected_logps\" but earlier pairs have "
                              "none (every pair carries them or none does)"
                            : "the record has no \"ref_chosen_logps\" / \"ref_rejected_logps\" but earlier pairs "
                              "have them (every pair carries them or none does)";
}

void count_bad(const std::string& location, const std::string& error, bool skip_bad,
               PreferencePreprocessSummary& summary) {
  const std::string reason = quoted_excerpt(error, 1000);
  if (!skip_bad) throw InputError(fmt::format("{}: {} (--skip-bad counts and skips such records)", location, reason));
  if (summary.bad_examples.size() < kBadPairExamples) {
    summary.bad_examples.push_back(location + ": " + reason);
    spdlog::warn("skipped {}: {}", location, reason);
  }
  ++summary.bad;
}

// The kept pairs: their two sides in a SampleStore (chosen at 2k, rejected at 2k + 1), so tokens beyond its buffer
// wait in a spool file, and the reference log-probs (8 bytes a pair) beside it.
struct PairStore {
  SampleStore sides;
  std::vector<float> ref_logps;  // chosen, rejected of each pair, when the pairs carry them

  PairStore(const std::string& spool_directory, size_t buffer_bytes) : sides(spool_directory, buffer_bytes) {}
  int64_t size() const { return sides.size() / 2; }
  void add(const EncodedPair& pair) {
    sides.add(pair.chosen);
    sides.add(pair.rejected);
    if (pair.has_ref_logps) ref_logps.insert(ref_logps.end(), {pair.ref_chosen_logps, pair.ref_rejected_logps});
  }
  EncodedPair pair(int64_t index) const {
    EncodedPair pair{.chosen = sides.tokens(2 * index), .rejected = sides.tokens(2 * index + 1)};
    if (!ref_logps.empty()) {
      pair.has_ref_logps = true;
      pair.ref_chosen_logps = ref_logps[static_cast<size_t>(2 * index)];
      pair.ref_rejected_logps = ref_logps[static_cast<size_t>(2 * index + 1)];
    }
    return pair;
  }
};

void tally(PairResult& result, const std::string& location, bool skip_bad, PairStore& pairs,
           PreferencePreprocessSummary& summary) {
  switch (result.status) {
    case PairStatus::TooLong: ++summary.dropped_too_long; return;
    case PairStatus::Bad: count_bad(location, result.error, skip_bad, summary); return;
    case PairStatus::Kept: break;
  }
  const std::string mismatch = ref_logps_mismatch(result.pair, summary);
  if (!mismatch.empty()) return count_bad(location, mismatch, skip_bad, summary);
  if (summary.pairs == 0) summary.ref_logps = result.pair.has_ref_logps;
  ++summary.pairs;
  summary.tokens += result.pair.size();
  summary.trained_tokens += result.pair.chosen.trained_count() + result.pair.rejected.trained_count();
  pairs.add(result.pair);
}

void write_dataset(const PreferencePreprocessOptions& options, const Tokenizer& tokenizer,
                   const PairStore& pairs, PreferencePreprocessSummary& summary) {
  DatasetInfo info;
  info.kind = "text";
  info.producer = "veomni-preprocess";
  info.producer_version = VEOMNI_VERSION_STRING;
  info.packing = "preference pairs: chosen then rejected in one sample, position_ids restarting at the rejected";
  info.max_seq_len = options.pair.max_seq_len;
  info.tokenizer = tokenizer.fingerprint();
  info.chat_template = chat_template_identity(options.chat_template, options.tokenizer_path);
  info.chat_template_kwargs = options.chat_template_kwargs.dump();
  DatasetWriterOptions writer_options;
  writer_options.compression_level = options.compression_level;
  const int64_t count = pairs.size();
  VEOMNI_INPUT_CHECK(options.num_shards <= count, "--num-shards {} is more than the {} pairs to write",
                     options.num_shards, count);
  ShardedDatasetWriter writer(options.out, count, options.num_shards, info, writer_options);
  for (int64_t k = 0; k < count; ++k) writer.append(preference_sample(pairs.pair(k)));
  writer.close();
  summary.files = writer.paths();
  for (const std::string& file : summary.files) summary.output_bytes += std::filesystem::file_size(file);
}

}  // namespace

Sample preference_sample(const EncodedPair& pair) {
  const int64_t length = pair.size();
  Tensor ids = Tensor::empty({length}, DType::I64), labels = Tensor::empty({length}, DType::I64);
  Tensor positions = Tensor::empty({length}, DType::I64);
  put_side(pair.chosen, 0, ids.data<int64_t>(), labels.data<int64_t>(), positions.data<int64_t>());
  put_side(pair.rejected, pair.chosen.size(), ids.data<int64_t>(), labels.data<int64_t>(), positions.data<int64_t>());
  Sample sample;
  sample["input_ids"] = ids;
  sample["labels"] = labels;
  sample["attention_mask"] = Tensor::full<int64_t>({length}, 1);
  sample["position_ids"] = positions;
  sample[kChosenLengthKey] = Tensor::from_vector(std::vector<int64_t>{pair.chosen.size()}, {1});
  if (pair.has_ref_logps) {
    sample[kRefChosenLogpsKey] = Tensor::from_vector(std::vector<float>{pair.ref_chosen_logps}, {1});
    sample[kRefRejectedLogpsKey] = Tensor::from_vector(std::vector<float>{pair.ref_rejected_logps}, {1});
  }
  return sample;
}

PreferencePreprocessSummary preprocess_preference(const PreferencePreprocessOptions& options) {
  const auto start = Clock::now();
  VEOMNI_INPUT_CHECK(options.num_shards >= 1, "--num-shards must be at least 1, got {}", options.num_shards);
  const Tokenizer tokenizer = Tokenizer::from_file(options.tokenizer_path);
  const PairEncoder encoder(tokenizer, options.pair);
  const int threads = resolve_threads(options.threads);
  spdlog::info("tokenizer {} ({} ids), {} thread(s)", tokenizer.fingerprint(), tokenizer.id_limit(), threads);

  std::unique_ptr<ChatTemplateWorker> worker;
  std::unique_ptr<PreferenceTemplateEncoder> template_encoder;
  if (options.chat_template != "chatml") {
    const ChatTemplateSource source = load_chat_template(options.chat_template, options.tokenizer_path);
    worker = std::make_unique<ChatTemplateWorker>(default_chat_template_worker_paths(), source.text, source.globals);
    template_encoder =
        std::make_unique<PreferenceTemplateEncoder>(tokenizer, *worker, options.pair, options.chat_template_kwargs);
    spdlog::info("chat template {}", source.origin);
  }

  RecordReader reader(options.inputs, RecordReader::kDefaultBlockBytes, options.max_line_bytes);
  RecordProgress progress(reader);
  PreferencePreprocessSummary summary;
  summary.tokenizer = tokenizer.fingerprint();
  PairStore pairs(std::filesystem::absolute(options.out).parent_path().string(), options.buffer_bytes);
  std::vector<RecordRef> block;
  std::vector<PairResult> results;
  while (reader.next_block(block)) {
    if (template_encoder) {
      results = template_encoder->encode_block(block, reader, threads);
    } else {
      results.assign(block.size(), {});
      parallel_for(block.size(), threads, [&](size_t i) {
        results[i] = block[i].value ? encoder.encode_value(*block[i].value) : encoder.encode_line(block[i].line);
      });
    }
    for (size_t i = 0; i < block.size(); ++i)
      tally(results[i], reader.location(block[i]), options.skip_bad, pairs, summary);
    summary.records += static_cast<int64_t>(block.size());
    progress.update(summary.records, summary.pairs);
  }
  check_no_empty_input(reader, options.skip_bad);
  summary.input_bytes = reader.bytes_read();
  VEOMNI_INPUT_CHECK(summary.pairs > 0, "no pair to write: {} record(s) read, {} bad, {} too long", summary.records,
                     summary.bad, summary.dropped_too_long);
  spdlog::info("encoded {} records in {:.1f} s; writing {}", summary.records, pair_seconds_since(start), options.out);
  write_dataset(options, tokenizer, pairs, summary);
  summary.seconds = pair_seconds_since(start);
  return summary;
}

}  // namespace veomni
