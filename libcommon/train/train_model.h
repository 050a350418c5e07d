// The model a training run steps: the Qwen3 / Qwen3-MoE body or a multimodal one (Qwen3-VL, Qwen3-VL-MoE, the
// Qwen3-Omni thinker), chosen by config.json's model_type, behind one body interface, with its heads.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/causal_lm.h"
#include "model/heads/lm_head.h"
#include "model/heads/value_head.h"
#include "model/model_body.h"
#include "model/model_config.h"
#include "model/model_head.h"
#include "model/parallel_hooks.h"
#include "model/thinker/multimodal_lm.h"
#include "model/thinker/thinker_config.h"

namespace veomni {

// config.json (or a directory holding one) names a multimodal model_type.
bool is_multimodal_config(const std::string& config_path);
// That config.json as compact JSON text (checkpoints keep a multimodal model's whole config for the merge).
std::string config_json_text(const std::string& config_path);

// Which parameters of a multimodal model train and at what peak learning rate, from their HF names (VeOmni's
// VLM trainer: a parameter whose name holds "visual" is the vision tower's, "audio_tower" the audio encoder's).
enum class ParamRole { LanguageModel, Vision, Audio };
ParamRole param_role(const std::string& hf_name);
// Frozen under train.freeze_vit / freeze_audio_tower as VeOmni freezes: the whole vision tower, except that the
// Qwen3-Omni thinker keeps visual.merger trainable; the audio encoder except audio_tower.proj1.
bool param_frozen(const std::string& hf_name, const std::string& model_type, bool freeze_vit,
                  bool freeze_audio_tower);

// The model of a training run: one body (text or multimodal, behind ModelBody) and the head the objective reads.
// The head is registered at construction, so the parameter set (and checkpoints) depend on the model and head only.
class TrainModel {
 public:
  // The text body from a qwen3 / qwen3_moe config, or the multimodal body from a thinker config, with its head.
  // freeze_vit (VL only, where the whole tower is frozen) skips the vision backward; partial freezes still run it
  // (the trainer leaves the frozen parameters out of the optimizer).
  TrainModel(const ModelConfig& config, const ModelOptions& options, ModelHead head = ModelHead::LanguageModel);
  TrainModel(const ThinkerConfig& config, const ModelOptions& options, bool freeze_vit,
             ModelHead head = ModelHead::LanguageModel);
  ~TrainModel();

  ParamStore& params() { return body_->params(); }
  ModelBody& body() { return *body_; }
  ModelHead head() const { return head_; }
  // The head of the kind the model was built with (an internal error for another kind).
  LmHead& lm_head();
  ValueHead& value_head();
  // The HF initialisation of every parameter, the LoRA adapters' as PEFT's (A kaiming-uniform, B zeros).
  void init_weights(uint64_t seed) { body_->init_weights(seed); }

  // LoRA (options.lora_config.rank > 0): the adapters are registered right after their projections' weights
  // (`<module>.lora_A.weight` [r, in], `<module>.lora_B.weight` [out, r]; experts [E, r, in] / [E, out, r], or
  // [r, in] / [out, r] with share_expert_lora) and only they, and a value head (score.*), keep trainable; every
  // other parameter is frozen (Parameter::trainable false: no gradient, no weight-gradient work).
  bool has_lora() const { return !lora_params_.empty(); }
  // The adapters' parameters in registration order (empty without LoRA).
  const std::vector<Parameter*>& lora_params() const { return lora_params_; }
  // On (the default): forward and backward apply the adapters. Off: the model computes the base model exactly and
  // the adapters get no gradient (DPO's reference model under a LoRA policy). No effect without LoRA.
  void set_adapters_enabled(bool enabled);
  bool adapters_enabled() const;
  // FSDP hooks on the body's and the heads' groups.
  void set_param_hooks(ParamHooks* hooks);

 private:
  void make_head(const std::string& lm_head_name, ParamHooks* hooks);
  // Freezes the base and checks lora_modules against the model's adapter-capable modules.
  void setup_lora(const LoraConfig& config);

  ModelHead head_;
  std::unique_ptr<ModelBody> body_;
  std::unique_ptr<LmHead> lm_head_;        // LanguageModel
  std::unique_ptr<ValueHead> value_head_;  // SequenceReward, TokenValue
  std::vector<Parameter*> lora_params_;
};

// A run's start weights (into materialised parameters, or as the start values of deferred ones): the HF checkpoint
// directory model_path, or the HF initialisation seeded by seed when model_path is empty. LoRA adapters are never in an HF base directory: they
// start as PEFT initialises them (seeded by seed) either way.
void load_start_weights(TrainModel& model, const std::string& model_path, uint64_t seed);

}  // namespace veomni
