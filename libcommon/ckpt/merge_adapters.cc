// Adapter checkpoints to PEFT's directory or to a merged HuggingFace model, streamed from the base's weight files.
#include "ckpt/merge_adapters.h"

#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "ckpt/adapter_checkpoint.h"
#include "ckpt/base_model_identity.h"
#include "ckpt/model_param_list.h"
#include "ckpt/peft_adapter.h"
#include "ckpt/speech_stage_copy.h"
#include "ckpt/staged_directory.h"
#include "core/error.h"
#include "io/hf_checkpoint.h"
#include "io/json_file.h"
#include "model/hf_loader.h"
#include "model/thinker/thinker_config.h"
#include "model/weight_source.h"

namespace veomni {

namespace {

namespace fs = std::filesystem;

bool is_adapter_tensor(const std::string& name) { return !lora_base_weight_name(name).empty(); }

std::map<std::string, Tensor> adapter_tensors(const AdapterCheckpoint& ck) {
  std::map<std::string, Tensor> adapters;
  for (const auto& [name, value] : ck.tensors)
    if (is_adapter_tensor(name)) adapters.emplace(name, value);
  return adapters;
}

const char* merged_hf_dtype_name(DType dtype) { return dtype == DType::BF16 ? "bfloat16" : "float32"; }

// The base's weight of `param` plus the deltas of the adapters on it (f32, full), or the checkpoint's own tensor.
Tensor merged_parameter(const Parameter& param, const WeightSource& base, const AdapterCheckpoint& ck,
                        const std::map<std::string, Tensor>& stored) {
  if (const auto own = stored.find(param.name); own != stored.end()) return own->second;
  Tensor full = read_hf_parameter(base, param, DType::F32);
  // A linear module's weight is <module>.weight; an experts' fused tensor is adapted under its own name.
  const std::string module = param.name.ends_with(".weight")
                                 ? param.name.substr(0, param.name.size() - std::string_view(".weight").size())
                                 : param.name;
  const auto a = stored.find(module + ".lora_A.weight");
  if (a != stored.end())
    add_lora_delta(full, a->second, stored.at(module + ".lora_B.weight"), ck.lora.scale_of(module));
  return full;
}

}  // namespace

MergeSummary write_adapter_checkpoint_as_peft(const std::string& checkpoint, const std::string& out_dir,
                                              const MergeOptions& options) {
  const AdapterCheckpoint ck = read_adapter_checkpoint(checkpoint);
  for (const auto& [name, value] : ck.tensors)
    VEOMNI_INPUT_CHECK(is_adapter_tensor(name),
                       "{}: holds {} beside its adapters (a {} head), which PEFT's adapter directory does not carry "
                       "here (hint: write the merged model: veomni-ckpt-merge without --peft)",
                       ck.dir, name, model_head_name(ck.head));
  const std::map<std::string, Tensor> adapters = adapter_tensors(ck);
  const int64_t experts = ck.hf_config_json.empty()
                              ? ck.model_config.num_experts
                              : thinker_config_from_json(nlohmann::json::parse(ck.hf_config_json), ck.dir)
                                    .text.num_experts;
  write_peft_adapter_dir(out_dir, adapters, experts, ck.lora, ck.base.model_path, options.overwrite);
  MergeSummary summary;
  summary.checkpoint = ck.dir;
  summary.global_step = ck.global_step;
  summary.out_dir = out_dir;
  summary.architecture = "PEFT LoRA adapter";
  summary.tensors = adapters.size();
  for (const auto& [name, value] : adapters) summary.tensor_bytes += value.nbytes();
  summary.weight_files = {"adapter_model.safetensors"};
  return summary;
}

MergeSummary merge_adapter_checkpoint_to_hf(const std::string& checkpoint, const std::string& out_dir,
                                            const MergeOptions& options) {
  const AdapterCheckpoint ck = read_adapter_checkpoint(checkpoint);
  VEOMNI_INPUT_CHECK(!ck.base.random_init(),
                     "{}: its base was initialised at random (seed {}), so there is no base model on disk to merge "
                     "the adapters into (hint: train from model.model_path, or write the adapters with --peft)",
                     ck.dir, ck.base.seed);
  check_same_base_model(ck.base, identify_base_model(ck.base.model_path, ck.base.seed), ck.dir);
  std::error_code ec;
  VEOMNI_INPUT_CHECK(!fs::equivalent(out_dir, ck.dir, ec), "--out '{}' is the checkpoint being read", out_dir);
  const std::map<std::string, Tensor> stored(ck.tensors.begin(), ck.tensors.end());
  const HfCheckpointSource base(ck.base.model_path);
  const bool multimodal = !ck.hf_config_json.empty();
  ModelParamList model = multimodal
                             ? ModelParamList(thinker_config_from_json(nlohmann::json::parse(ck.hf_config_json), ck.dir),
                                              ck.head)
                             : ModelParamList(ck.model_config, ck.head);

  MergeSummary summary;
  summary.checkpoint = ck.dir;
  summary.global_step = ck.global_step;
  summary.out_dir = out_dir;
  StagedDirectory staged(out_dir, options.overwrite);
  if (multimodal) {
    nlohmann::ordered_json config = nlohmann::ordered_json::parse(ck.hf_config_json);
    config["dtype"] = merged_hf_dtype_name(options.dtype);
    write_json_file(staged.file("config.json"), config);
  } else {
    ModelConfig config = ck.model_config;
    config.dtype = merged_hf_dtype_name(options.dtype);
    save_model_config(config, staged.file("config.json"), ck.head);
    summary.architecture = hf_architecture(config.model_type, ck.head);
  }
  HfCheckpointWriter writer(staged.temp_path(), options.max_shard_bytes);
  for (const auto& p : model.params().all())
    for (const HfTensorSpec& spec : hf_tensor_specs(p->name, p->shape, options.experts)) {
      writer.declare(spec.name, options.dtype, spec.shape);
      ++summary.tensors;
    }
  const SpeechStageCopy speech(ck.hf_config_json, options.speech_from, ck.base.model_path);
  speech.declare(writer, options.dtype);
  summary.tensors += speech.size();
  summary.speech_tensors = speech.size();
  summary.speech_source = speech.source();
  for (const auto& p : model.params().all()) {
    Tensor full = merged_parameter(*p, base, ck, stored);
    if (options.dtype != DType::F32) full = full.to_dtype(options.dtype);
    export_hf_tensor(p->name, full, options.experts,
                     [&writer](const std::string& name, const Tensor& t) { writer.write(name, t); });
    spdlog::debug("merged {} {}", p->name, shape_str(p->shape));
  }
  speech.write(writer, options.dtype);
  summary.weight_files = writer.shard_files();
  summary.tensor_bytes = writer.total_bytes();
  writer.finish();
  // The tokenizer: --tokenizer, else the base directory's own files when it has any.
  if (options.copy_tokenizer && !options.tokenizer_path.empty()) {
    summary.tokenizer_files = copy_tokenizer_files(options.tokenizer_path, staged.temp_path(), "given with --tokenizer");
  } else if (options.copy_tokenizer && fs::is_directory(ck.base.model_path, ec) &&
             fs::is_regular_file(fs::path(ck.base.model_path) / "tokenizer_config.json", ec)) {
    summary.tokenizer_files = copy_tokenizer_files(ck.base.model_path, staged.temp_path(), "the base model's");
  }
  staged.commit();
  return summary;
}

}  // namespace veomni
