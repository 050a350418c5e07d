// veomni-preprocess text pipelines: JSONL text to ids (tokenize); conversations or text to a dataset (text).
#pragma once
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/text_preprocess_input.h"
#include "data/text_preprocess_record.h"

namespace veomni {

struct TokenizeOptions {
  std::string tokenizer_path;
  std::vector<std::string> inputs;  // JSONL files or JSON arrays; "-" is stdin
  std::string text_key = "text";
  int threads = 0;  // 0: one per hardware thread
  size_t max_line_bytes = kDefaultMaxLineBytes;  // a longer JSONL line is an InputError
};

struct TokenizeSummary {
  int64_t records = 0;
  int64_t tokens = 0;
  uint64_t input_bytes = 0;
  double seconds = 0;
};

// Writes one JSON array of ids per record to `out`, in input order (HF's Tokenizer.encode: nothing added).
// The first bad record is an InputError naming its file and line.
TokenizeSummary tokenize_records(const TokenizeOptions& options, std::FILE* out);

struct TextPreprocessOptions {
  std::string tokenizer_path;
  std::vector<std::string> inputs;
  std::string out;  // .h5 path; with num_shards > 1 "<out without .h5>-0000k-of-0000N.h5"
  RecordOptions record;
  // Conversations: "chatml" (our ChatML, the default), "model" (the template beside the tokenizer) or a .jinja
  // file, rendered by the chat-template worker with `chat_template_kwargs` (enable_thinking, ...).
  std::string chat_template = "chatml";
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  bool pack = false;  // rows of exactly record.max_seq_len tokens
  int64_t num_shards = 1;
  int threads = 0;
  bool skip_bad = false;  // count and skip bad records instead of failing on the first
  int compression_level = 1;
  size_t max_line_bytes = kDefaultMaxLineBytes;  // a longer JSONL line is an InputError
  // Tokenized samples held in memory; beyond it they go to an unlinked temporary file in out's directory.
  size_t buffer_bytes = 64u << 20;
};

struct TextPreprocessSummary {
  int64_t records = 0;         // non-blank JSONL lines and array elements read
  int64_t samples = 0;         // records kept
  int64_t rows = 0;            // dataset samples written (= samples without packing)
  int64_t tokens = 0;          // tokens of the kept samples, padding excluded
  int64_t trained_tokens = 0;  // of which training targets
  int64_t padding_tokens = 0;  // packing only
  int64_t truncated = 0;
  int64_t dropped_too_long = 0;           // --truncation drop
  int64_t dropped_no_target = 0;          // no assistant token left
  int64_t bad = 0;                        // skipped with skip_bad
  std::vector<std::string> bad_examples;  // "file:line: reason" of the first few
  uint64_t input_bytes = 0;
  uint64_t output_bytes = 0;
  double seconds = 0;
  std::vector<std::string> files;
  std::string tokenizer;  // the fingerprint recorded in the dataset
};

// Reads every record in blocks (tokenizing each block on all threads), keeping at most options.buffer_bytes of
// tokens in memory (the rest in a temporary file) plus 8 bytes per sample, then writes the dataset from there: DatasetInfo kind "text", producer
// veomni-preprocess, the tokenizer's fingerprint, the packing. Keys input_ids, labels, attention_mask,
// position_ids, all i64 [L]. Nothing is written when a record is bad (without skip_bad), when an input file holds
// no record, or when no sample is left: InputError naming the file and line.
TextPreprocessSummary preprocess_text(const TextPreprocessOptions& options);

}  // namespace veomni
