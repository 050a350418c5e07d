// veomni-ckpt-merge's work: a checkpoint's master weights as a HuggingFace model directory (config.json, one
// model.safetensors or shards plus index, the run's tokenizer files), streamed one tensor at a time.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/hf_loader.h"

namespace veomni {

struct MergeOptions {
  uint64_t max_shard_bytes = 5'000'000'000;  // --max-shard-size (5GB as HuggingFace counts)
  DType dtype = DType::F32;                  // F32 (exact masters) or BF16
  ExpertNaming experts = ExpertNaming::PerExpert;
  bool copy_tokenizer = true;      // copy the tokenizer files of the run's model.tokenizer_path, when it names one
  std::string tokenizer_path;      // overrides the run's model.tokenizer_path ("" = the run's)
  bool overwrite = false;          // replace an existing non-empty output directory
  // A Qwen3-Omni model's talker.* and code2wav.* tensors come from here (a HF directory or .safetensors file)
  // instead of the model the run started from ("" = that model).
  std::string speech_from;
};

struct MergeSummary {
  std::string checkpoint;  // the checkpoint directory read
  int64_t global_step = 0;
  std::string out_dir;
  std::string architecture;  // the transformers class config.json names (a text model's; "" for a multimodal one)
  size_t tensors = 0;
  uint64_t tensor_bytes = 0;
  std::vector<std::string> weight_files;
  std::vector<std::string> tokenizer_files;
  size_t speech_tensors = 0;  // talker.* and code2wav.* tensors copied (a Qwen3-Omni model), part of `tensors`
  std::string speech_source;  // where they came from
};

// The HF file names a tokenizer consists of (those present are copied).
const std::vector<std::string>& tokenizer_file_names();

// Copies the tokenizer files of `source` (a directory: those of tokenizer_file_names() it holds; or one file) into
// dir; returns their names. `origin` says in messages where the path came from (the --tokenizer flag, the run's
// model.tokenizer_path). InputError when the source is missing or holds no tokenizer file.
std::vector<std::string> copy_tokenizer_files(const std::string& source, const std::string& dir,
                                              const std::string& origin);

// Reads `checkpoint` (a checkpoint directory, a checkpoints directory with `latest`, or a run directory) and writes
// out_dir atomically (a temporary directory renamed at the end: an error leaves nothing under out_dir). Tied
// embeddings have no lm_head.weight. A reward checkpoint merges as ...ForSequenceClassification (score.weight), a
// value checkpoint as ...ForTokenClassification (score.weight, score.bias), both with one label (text models only).
// A Qwen3-Omni checkpoint also gets the talker.* and code2wav.* tensors of options.speech_from, else of the run's
// model.model_path (see SpeechStageCopy). Memory stays bounded by the largest parameter.
MergeSummary merge_checkpoint_to_hf(const std::string& checkpoint, const std::string& out_dir,
                                    const MergeOptions& options);

}  // namespace veomni
