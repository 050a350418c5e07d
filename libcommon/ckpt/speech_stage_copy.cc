// Finding and copying a Qwen3-Omni model's talker and code2wav tensors for a merge.
#include "ckpt/speech_stage_copy.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace veomni {

namespace {

namespace fs = std::filesystem;

bool is_omni_config(const std::string& hf_config_json) {
  if (hf_config_json.empty()) return false;
  const nlohmann::json config = nlohmann::json::parse(hf_config_json);
  return config.is_object() && config.value("model_type", std::string()) == "qwen3_omni_moe";
}

// transformers builds the talker and code2wav only with enable_audio_output (default true).
bool has_audio_output(const std::string& hf_config_json) {
  const nlohmann::json config = nlohmann::json::parse(hf_config_json);
  return !config.contains("enable_audio_output") || !config.at("enable_audio_output").is_boolean() ||
         config.at("enable_audio_output").get<bool>();
}

DType written_dtype(DType stored, DType merge_dtype) { return dtype_is_floating(stored) ? merge_dtype : stored; }

}  // namespace

bool is_speech_stage_tensor(const std::string& name) {
  return name.rfind("talker.", 0) == 0 || name.rfind("code2wav.", 0) == 0;
}

SpeechStageCopy::SpeechStageCopy(const std::string& hf_config_json, const std::string& explicit_source,
                                 const std::string& base_path) {
  const bool omni = is_omni_config(hf_config_json);
  if (!explicit_source.empty()) {
    VEOMNI_INPUT_CHECK(omni, "--speech-from '{}': the checkpoint is not a Qwen3-Omni model (model_type "
                             "qwen3_omni_moe), which alone has speech stages", explicit_source);
    open(explicit_source);
    VEOMNI_INPUT_CHECK(!names_.empty(),
                       "--speech-from '{}' holds no talker.* or code2wav.* tensors (hint: name the full "
                       "Qwen3OmniMoeForConditionalGeneration directory the run started from)",
                       explicit_source);
    return;
  }
  if (!omni || !has_audio_output(hf_config_json)) return;
  std::error_code ec;
  if (base_path.empty() || !fs::exists(base_path, ec)) {
    spdlog::warn("the merged Qwen3-Omni model holds no talker or code2wav weights: {} (hint: --speech-from DIR names "
                 "the Omni model to copy them from)",
                 base_path.empty() ? "the run started from a random initialisation"
                                   : "the model the run started from, '" + base_path + "', is gone");
    return;
  }
  try {
    open(base_path);
  } catch (const InputError& e) {
    spdlog::warn("the merged Qwen3-Omni model holds no talker or code2wav weights: '{}' cannot be read ({}); hint: "
                 "--speech-from DIR",
                 base_path, e.what());
    reader_.reset();
    names_.clear();
  }
}

SpeechStageCopy::~SpeechStageCopy() = default;

void SpeechStageCopy::open(const std::string& path) {
  reader_ = std::make_unique<HfCheckpointReader>(path);
  source_ = path;
  for (const std::string& name : reader_->names())
    if (is_speech_stage_tensor(name)) names_.push_back(name);
}

void SpeechStageCopy::declare(HfCheckpointWriter& writer, DType dtype) const {
  for (const std::string& name : names_) {
    const SafetensorsEntry& entry = reader_->entry(name);
    writer.declare(name, written_dtype(entry.dtype, dtype), entry.shape);
  }
}

void SpeechStageCopy::write(HfCheckpointWriter& writer, DType dtype) const {
  for (const std::string& name : names_) {
    Tensor t = reader_->read(name);
    const DType target = written_dtype(t.dtype(), dtype);
    writer.write(name, t.dtype() == target ? t : t.to_dtype(target));
  }
}

}  // namespace veomni
