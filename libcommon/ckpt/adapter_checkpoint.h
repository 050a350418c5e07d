// An adapter (LoRA) checkpoint read whole: its trainable tensors gathered in full, its LoRA settings and the base
// model it was trained on. A merge to PEFT's layout (or into the base's weights) starts from it.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ckpt/checkpoint_metadata.h"
#include "core/tensor.h"

namespace veomni {

struct AdapterCheckpoint {
  std::string dir;  // the checkpoint directory read (global_step_N)
  int64_t global_step = 0;
  LoraConfig lora;
  BaseModelIdentity base;
  ModelHead head = ModelHead::LanguageModel;
  ModelConfig model_config;    // the base's text model config
  std::string hf_config_json;  // a multimodal base's whole config.json ("" for a text model)
  // Every stored tensor in metadata order, f32 in its full shape: `<module>.lora_A.weight` [r, in] /
  // `<module>.lora_B.weight` [out, r] (experts [E, r, in] / [E, out, r]), and score.* when the head has one.
  std::vector<std::pair<std::string, Tensor>> tensors;
};

// `checkpoint` is a checkpoint directory, or an output_dir / checkpoints directory whose `latest` names one.
// InputError naming it when it is a full model's checkpoint (not an adapter one), or damaged.
AdapterCheckpoint read_adapter_checkpoint(const std::string& checkpoint);

}  // namespace veomni
