// veomni-preprocess multimodal: conversation JSONL with image, video and audio parts to a Qwen3-VL / Qwen3-Omni dataset.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset_format.h"
#include "data/text_preprocess_input.h"
#include "media/multimodal_record.h"

namespace veomni {

struct MultimodalPreprocessOptions {
  MultimodalModel model = MultimodalModel::Qwen3VL;
  std::string tokenizer_path;
  std::vector<std::string> inputs;  // JSONL files or JSON arrays; "-" is stdin
  std::string out;                  // one .h5 file
  std::string processor_config;     // HF preprocessor_config.json; "" for the defaults
  std::string media_root;           // base of relative media paths; "" for each input file's directory
  std::optional<std::string> system_prompt;
  int64_t max_seq_len = 0;          // 0: no limit
  bool error_on_too_long = false;   // a longer sample is an InputError instead of being dropped
  int threads = 0;                  // 0: one per hardware thread
  bool skip_bad = false;            // count and skip bad records (bad media included) instead of failing
  int compression_level = 1;
  size_t max_line_bytes = kDefaultMaxLineBytes;  // a longer JSONL line is an InputError naming it
  // "chatml" (our ChatML), "model" (the tokenizer folder's chat template) or a template file: with a model template
  // each conversation is rendered by the chat-template worker with `chat_template_kwargs`, and the media blocks it
  // renders are expanded as ChatML's are (MultimodalTemplate::encode_rendering). Not with `preference` (InputError).
  std::string chat_template = "chatml";
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  // Preference pairs (veomni-preprocess preference --model-type): records as MultimodalPairEncoder reads them, one
  // pair sample each; max_seq_len bounds the pair (chosen + rejected tokens).
  bool preference = false;
};

struct MultimodalPreprocessSummary {
  int64_t records = 0;
  int64_t samples = 0;  // pairs, with options.preference
  int64_t images = 0, videos = 0, audio_clips = 0;  // in the kept samples
  int64_t tokens = 0;
  int64_t trained_tokens = 0;
  int64_t dropped_too_long = 0;
  int64_t dropped_no_target = 0;
  int64_t bad = 0;
  std::vector<std::string> bad_examples;  // "file:line: reason" of the first few
  bool audio_ids_from_tokenizer = true;
  bool ref_logps = false;  // preference: the pairs carry ref_chosen_logps / ref_rejected_logps
  double seconds = 0;        // the whole run
  double setup_seconds = 0;  // of which loading the tokenizer and the processor settings
  uint64_t output_bytes = 0;
  std::string file;
  std::string tokenizer;
  std::vector<KeyInfo> keys;  // the dataset's schema
};

// Reads the records, processes a few per thread at a time (bounded memory) and streams the samples, in input
// order, into one dataset (DatasetInfo kind "vl" or "omni", producer veomni-preprocess). A bad record stops the run
// with an InputError "<file>:<line>: <reason>" (the reason names the media path for bad media) and leaves no
// output, unless skip_bad. Samples longer than max_seq_len are dropped (or, with error_on_too_long, an InputError):
// cutting through a media block would leave tokens without their features, so there is no truncation. Samples
// without an assistant token are dropped and counted. InputError when no sample is left. With options.preference
// the samples are pairs (format version 2), every pair carrying reference log-probs or none (a record breaking the
// rule set by the first kept pair is a bad record).
MultimodalPreprocessSummary preprocess_multimodal(const MultimodalPreprocessOptions& options);

}  // namespace veomni
