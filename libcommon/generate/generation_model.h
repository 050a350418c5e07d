// The model veomni-generate runs: a Qwen3 / Qwen3-MoE causal LM loaded from a HuggingFace directory or from the
// master weights of a veomni checkpoint, on one device, with its stop tokens and the directory of its tokenizer.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/causal_lm.h"
#include "model/model_config.h"
#include "model/thinker/multimodal_lm.h"

namespace veomni {

struct GenerationModel {
  ModelConfig config;  // the language model's
  std::string model_type;  // config.json's: qwen3, qwen3_moe, or the multimodal model's (qwen3_vl, ...)
  std::unique_ptr<CausalLM> model;
  std::string source;                  // "HF directory DIR" or "checkpoint DIR"
  std::string tokenizer_dir;           // where tokenizer.json is looked for ("" when the model names none)
  std::vector<int64_t> eos_token_ids;  // generation_config.json's eos_token_id, else config.json's
  bool mrope = false;                  // a multimodal model's language model: M-RoPE positions
  std::string hf_directory;     // the HF directory it was loaded from ("" for a checkpoint)
  std::string multimodal_type;  // a multimodal HF directory's model_type (qwen3_vl, qwen3_omni_moe, ...), else ""
  // The media side of a multimodal HF directory, for prompts with media (generate/media_prompt.h), once
  // load_media_encoders ran: its vision tower and audio encoder loaded, its token embedding shared with `model`; the
  // rest of its language model is left unmaterialised (the language model runs in `model`).
  std::unique_ptr<MultimodalLM> multimodal;
};

// `path`: a HuggingFace directory (config.json + safetensors, as veomni-ckpt-merge writes it), or what veomni-score
// --checkpoint takes (global_step_N, a checkpoints directory naming `latest`, a run directory). Compute in f32 on the
// CPU, bf16 on a GPU. A multimodal directory (Qwen3-VL, Qwen3-VL-MoE, the Qwen3-Omni thinker) loads its language
// model (its media encoders: load_media_encoders). InputError for a missing path, a reward/value model, a multimodal or
// adapter-only checkpoint.
GenerationModel load_generation_model(const std::string& path, Device device);

// Loads model.multimodal (once) from the multimodal HF directory the model came from, in its device and dtype.
// InputError for a text model or a checkpoint, or a directory without the encoders' tensors.
void load_media_encoders(GenerationModel& model);

// The eos_token_id of a JSON object (an int, a list of ints, or absent/null: none); InputError naming `source` for
// anything else.
std::vector<int64_t> eos_token_ids_of(const nlohmann::json& json, const std::string& source);

}  // namespace veomni
