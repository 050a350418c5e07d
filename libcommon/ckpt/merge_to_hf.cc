// Merging: every parameter's full tensor is assembled from the rank shards, converted and streamed to safetensors.
#include "ckpt/merge_to_hf.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "ckpt/checkpoint_consistency.h"
#include "ckpt/checkpoint_dir.h"
#include "ckpt/checkpoint_reader.h"
#include "ckpt/speech_stage_copy.h"
#include "ckpt/staged_directory.h"
#include "io/hf_checkpoint.h"
#include "io/json_file.h"
#include "model/model_config.h"
#include "train/train_config.h"

namespace veomni {

namespace fs = std::filesystem;

namespace {

const char* hf_dtype_name(DType dtype) { return dtype == DType::BF16 ? "bfloat16" : "float32"; }

// The model.model_path of the run that wrote the checkpoint ("" when unknown: a checkpoint made by
// veomni-ckpt-shard, or a run config this version cannot read).
std::string run_model_path(const CheckpointMetadata& metadata) {
  if (metadata.train_config_yaml.empty()) return "";
  try {
    return train_config_from_yaml(metadata.train_config_yaml, "the checkpoint's run config").model.model_path;
  } catch (const InputError& e) {
    spdlog::warn("cannot read the run config stored in the checkpoint: {}", e.what());
    return "";
  }
}

void write_weights(CheckpointReader& reader, const std::string& dir, const MergeOptions& options,
                   const SpeechStageCopy& speech, MergeSummary& summary) {
  HfCheckpointWriter writer(dir, options.max_shard_bytes);
  const std::vector<CheckpointParam>& params = reader.metadata().params;
  for (const CheckpointParam& p : params)
    for (const HfTensorSpec& spec : hf_tensor_specs(p.name, p.shape, options.experts)) {
      writer.declare(spec.name, options.dtype, spec.shape);
      ++summary.tensors;
    }
  speech.declare(writer, options.dtype);
  summary.tensors += speech.size();
  summary.speech_tensors = speech.size();
  summary.speech_source = speech.source();
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor full = reader.read_full(i, ShardField::Master);
    if (options.dtype != DType::F32) full = full.to_dtype(options.dtype);
    export_hf_tensor(params[i].name, full, options.experts,
                     [&writer](const std::string& name, const Tensor& t) { writer.write(name, t); });
    reader.close_files();
    spdlog::debug("merged {} {}", params[i].name, shape_str(params[i].shape));
  }
  speech.write(writer, options.dtype);
  summary.weight_files = writer.shard_files();
  summary.tensor_bytes = writer.total_bytes();
  writer.finish();
}

}  // namespace

std::vector<std::string> copy_tokenizer_files(const std::string& source, const std::string& dir,
                                              const std::string& origin) {
  std::error_code ec;
  VEOMNI_INPUT_CHECK(fs::exists(source, ec),
                     "tokenizer '{}' ({}) does not exist (hint: --tokenizer PATH names another place, --no-tokenizer "
                     "skips it)",
                     source, origin);
  std::vector<fs::path> files;
  if (fs::is_directory(source, ec)) {
    for (const std::string& name : tokenizer_file_names())
      if (fs::is_regular_file(fs::path(source) / name, ec)) files.push_back(fs::path(source) / name);
    VEOMNI_INPUT_CHECK(!files.empty(), "tokenizer directory '{}' holds none of tokenizer.json, tokenizer_config.json, "
                                       "vocab.json, merges.txt (hint: --no-tokenizer skips it)", source);
  } else {
    files.push_back(source);
  }
  std::vector<std::string> copied;
  for (const fs::path& file : files) {
    fs::copy_file(file, fs::path(dir) / file.filename(), fs::copy_options::overwrite_existing, ec);
    VEOMNI_INPUT_CHECK(!ec, "cannot copy tokenizer file '{}': {}", file.string(), ec.message());
    copied.push_back(file.filename().string());
  }
  return copied;
}

const std::vector<std::string>& tokenizer_file_names() {
  static const std::vector<std::string> names = {
      "tokenizer.json",          "tokenizer_config.json", "vocab.json",          "merges.txt",
      "special_tokens_map.json", "added_tokens.json",     "chat_template.jinja", "chat_template.json"};
  return names;
}

MergeSummary merge_checkpoint_to_hf(const std::string& checkpoint, const std::string& out_dir,
                                    const MergeOptions& options) {
  VEOMNI_INPUT_CHECK(options.dtype == DType::F32 || options.dtype == DType::BF16,
                     "merge dtype {} is not supported (fp32 or bf16)", dtype_name(options.dtype));
  CheckpointReader reader(resolve_checkpoint_path(checkpoint));
  std::error_code ec;
  VEOMNI_INPUT_CHECK(!fs::equivalent(out_dir, reader.dir(), ec), "--out '{}' is the checkpoint being read", out_dir);
  reader.require_full_model("merging to a HuggingFace model");
  check_params_match_model_config(reader);
  check_rank_files_match_params(reader);
  MergeSummary summary;
  summary.checkpoint = reader.dir();
  summary.global_step = reader.metadata().position.global_step;
  summary.out_dir = out_dir;
  StagedDirectory staged(out_dir, options.overwrite);

  const ModelHead head = reader.metadata().head;
  if (reader.metadata().hf_config_json.empty()) {
    ModelConfig config = reader.metadata().model_config;
    config.dtype = hf_dtype_name(options.dtype);
    save_model_config(config, staged.file("config.json"), head);
    summary.architecture = hf_architecture(config.model_type, head);
  } else {
    VEOMNI_INPUT_CHECK(head == ModelHead::LanguageModel,
                       "{}: a multimodal model with a {} head (train.objective {}) has no HuggingFace class to merge "
                       "to: multimodal checkpoints merge as causal LMs only (key 'model_head')",
                       (fs::path(reader.dir()) / kCheckpointMetadataFile).string(), model_head_name(head),
                       model_head_objectives(head));
    // A multimodal model: its own config.json, with the dtype of the weights written.
    nlohmann::ordered_json config = nlohmann::ordered_json::parse(reader.metadata().hf_config_json);
    config["dtype"] = hf_dtype_name(options.dtype);
    write_json_file(staged.file("config.json"), config);
  }
  const SpeechStageCopy speech(reader.metadata().hf_config_json, options.speech_from,
                               run_model_path(reader.metadata()));
  write_weights(reader, staged.temp_path(), options, speech, summary);
  const bool from_flag = !options.tokenizer_path.empty();
  const std::string tokenizer = from_flag ? options.tokenizer_path : reader.metadata().tokenizer_path;
  if (options.copy_tokenizer && !tokenizer.empty())
    summary.tokenizer_files = copy_tokenizer_files(tokenizer, staged.temp_path(),
                                             from_flag ? "given with --tokenizer" : "the run's model.tokenizer_path");
  staged.commit();
  return summary;
}

}  // namespace veomni
