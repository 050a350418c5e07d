// Qwen3-VL / Qwen3-VL-MoE / Qwen3-Omni thinker: vision tower, audio encoder and the Qwen3 LM with M-RoPE and
// deepstack, explicit forward and backward over one packed micro-batch (single process).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "data/batch.h"
#include "data/mrope_positions.h"
#include "model/audio/audio_encoder.h"
#include "model/causal_lm.h"
#include "model/param.h"
#include "model/thinker/multimodal_batch.h"
#include "model/thinker/thinker_config.h"
#include "model/vision/vision_tower.h"

namespace veomni {

struct MultimodalOptions {
  // Device, compute dtype, recompute of the LM layers, and the parallel hooks: sequence (Ulysses) and expert hooks
  // reach the LM; parameter (FSDP) hooks are installed after construction with set_param_hooks.
  ModelOptions lm;
  bool freeze_vit = false;          // the vision tower runs without keeping activations and gets no gradient
  bool freeze_audio_tower = false;  // the same for the audio encoder
  // Under Ulysses SP (lm.hooks.sequence of size P > 1) the vision tower splits the patches over the group (padded to
  // P x merge_unit, heads all-to-all'd in attention) and its outputs are all-gathered for the fill-back; false, or
  // when P does not divide the tower's heads: every rank encodes all of the micro-batch's patches. Either way the
  // audio encoder runs whole on every rank.
  bool vision_sequence_parallel = true;
};

class MultimodalLM {
 public:
  // One store holds every parameter under its transformers 5.17 name: the vision tower's groups ("visual.*"), the
  // audio encoder's ("audio.*", Qwen3-Omni only), then the LM's ("embed", "layers.{i}", "head") named
  // model.language_model.* + lm_head.weight (Qwen3-VL) or thinker.model.* + thinker.lm_head.weight (Omni).
  // The values are materialised (zeros) on options.lm.device in options.lm.compute_dtype.
  MultimodalLM(const ThinkerConfig& config, const MultimodalOptions& options);
  ~MultimodalLM();
  MultimodalLM(const MultimodalLM&) = delete;
  MultimodalLM& operator=(const MultimodalLM&) = delete;

  const ThinkerConfig& config() const;
  ParamStore& params();
  CausalLM& language_model();
  VisionTower& vision();
  AudioEncoder* audio();  // null without an audio encoder

  // Each part's HF init (deterministic per seed and parameter name).
  void init_weights(uint64_t seed);
  // Installs (or, with nullptr, removes) FSDP hooks on the vision tower, the audio encoder and the LM.
  void set_param_hooks(ParamHooks* hooks);

  // Text embeddings, the media embeddings written over their rows, the LM layers with deepstack feature k added at
  // the visual (image and video) rows after layer k, the loss. The encoders run on all of the batch's media, every
  // call (also with none: the parameter hooks see every group); an SP slice takes the output rows its masks mark,
  // from the batch's *_row_begin on, and backward gives the other rows zero gradient, so the encoders' parameter
  // gradients sum exactly over the SP group. Mask counts that differ from the encoders' output rows, overlapping
  // masks and bad shapes are InputErrors. Keeps what backward needs unless only_loss;
  // logits_out, when non-null, receives the [S, V] f32 logits.
  ForwardStats forward(const MultimodalBatch& batch, bool only_loss = false, Tensor* logits_out = nullptr);
  // Backward of the last forward (scales as CausalLM::backward), through the LM into the encoders that are not
  // frozen. The embedding table gets no gradient from the media rows. Parameter grads accumulate.
  void backward(float ce_grad_scale, float aux_grad_scale);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace veomni
