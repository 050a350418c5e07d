// veomni-preprocess preference: conversational preference pairs (TRL / ultrafeedback_binarized JSONL) to a dataset of
// pair samples (man veomni-data(5): chosen then rejected, chosen_length, optional reference log-probs).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/sample.h"
#include "data/text_preprocess_input.h"
#include "data/text_preprocess_pair.h"

namespace veomni {

struct PreferencePreprocessOptions {
  std::string tokenizer_path;
  std::vector<std::string> inputs;  // JSONL files or JSON arrays; "-" is stdin
  std::string out;                  // .h5 path; with num_shards > 1 "<out without .h5>-0000k-of-0000N.h5"
  PairOptions pair;
  int64_t num_shards = 1;
  int threads = 0;
  bool skip_bad = false;  // count and skip bad records instead of failing on the first
  int compression_level = 1;
  size_t max_line_bytes = kDefaultMaxLineBytes;
  // "chatml" (the built-in template, the default), "model" (the template beside the tokenizer) or a .jinja file,
  // rendered by the chat-template worker with `chat_template_kwargs`.
  std::string chat_template = "chatml";
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  // Tokens of kept pairs held in memory; beyond it they go to an unlinked temporary file in out's directory.
  size_t buffer_bytes = 64u << 20;
};

struct PreferencePreprocessSummary {
  int64_t records = 0;         // non-blank JSONL lines and array elements read
  int64_t pairs = 0;           // samples written
  int64_t tokens = 0;          // chosen + rejected tokens of the kept pairs
  int64_t trained_tokens = 0;  // of which answer tokens (targets)
  int64_t dropped_too_long = 0;
  int64_t bad = 0;
  std::vector<std::string> bad_examples;  // "file:line: reason" of the first few
  bool ref_logps = false;                 // the pairs carry ref_chosen_logps / ref_rejected_logps
  uint64_t input_bytes = 0;
  uint64_t output_bytes = 0;
  double seconds = 0;
  std::vector<std::string> files;
  std::string tokenizer;
};

// The stored sample of a pair: input_ids, labels (-100 but on the answers), attention_mask (ones), position_ids
// (0..Lc-1 then 0..Lr-1), all i64 [Lc + Lr]; chosen_length i64 [1] = Lc; with reference log-probs also
// ref_chosen_logps and ref_rejected_logps, f32 [1].
Sample preference_sample(const EncodedPair& pair);

// Reads every record in blocks (tokenizing each block on all threads), keeping at most options.buffer_bytes of tokens
// in memory (the rest in a temporary file) plus 8 bytes a side and, with reference log-probs, 8 a pair; then writes
// the dataset (kind "text", producer veomni-preprocess, format version 2). Pairs longer than pair.max_seq_len are dropped and counted. Every pair must carry reference
// log-probs or none. Nothing is written when a record is bad (without skip_bad), when an input file holds no record,
// or when no pair is left: InputError naming the file and line.
PreferencePreprocessSummary preprocess_preference(const PreferencePreprocessOptions& options);

}  // namespace veomni
