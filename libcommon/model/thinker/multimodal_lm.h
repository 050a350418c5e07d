// Qwen3-VL / Qwen3-VL-MoE / Qwen3-Omni thinker: the multimodal body (vision tower, audio encoder and the Qwen3 text
// body with M-RoPE and deepstack) and the LM over it, explicit forward and backward over one packed micro-batch.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "data/batch.h"
#include "data/mrope_positions.h"
#include "model/audio/audio_encoder.h"
#include "model/causal_lm.h"
#include "model/heads/lm_head.h"
#include "model/model_body.h"
#include "model/param.h"
#include "model/sft_pass.h"
#include "model/thinker/multimodal_batch.h"
#include "model/thinker/thinker_config.h"
#include "model/vision/vision_tower.h"

namespace veomni {

struct MultimodalOptions {
  // Device, compute dtype, recompute of the LM layers, and the parallel hooks: sequence (Ulysses) and expert hooks
  // reach the LM; parameter (FSDP) hooks are installed after construction with set_param_hooks. lm.lora_config
  // puts LoRA adapters on the projections it targets in the towers and the LM alike; an encoder none of whose
  // parameters trains (Parameter::trainable) runs without keeping activations and gets no backward.
  ModelOptions lm;
  bool freeze_vit = false;          // the vision tower runs without keeping activations and gets no gradient
  bool freeze_audio_tower = false;  // the same for the audio encoder
  // Under Ulysses SP (lm.hooks.sequence of size P > 1) the vision tower splits the patches over the group (padded to
  // P x merge_unit, heads all-to-all'd in attention) and its outputs are all-gathered for the fill-back; false, or
  // when P does not divide the tower's heads: every rank encodes all of the micro-batch's patches. Either way the
  // audio encoder runs whole on every rank.
  bool vision_sequence_parallel = true;
};

// The multimodal body: the vision tower, the audio encoder and the text body. One store holds every parameter under
// its transformers 5.17 name: the vision tower's groups ("visual.*"), the audio encoder's ("audio.*", Qwen3-Omni
// only), then the text body's ("embed", "layers.{i}", "head") named model.language_model.* (Qwen3-VL) or
// thinker.model.* (Omni).
class MultimodalBody final : public ModelBody {
 public:
  // The values are materialised (zeros) on options.lm.device in options.lm.compute_dtype.
  MultimodalBody(const ThinkerConfig& config, const MultimodalOptions& options);
  ~MultimodalBody() override;
  MultimodalBody(const MultimodalBody&) = delete;
  MultimodalBody& operator=(const MultimodalBody&) = delete;

  const ThinkerConfig& config() const;
  TextBody& language_model();
  VisionTower& vision();
  AudioEncoder* audio();  // null without an audio encoder

  ParamStore& params() override;
  const ModelConfig& text_config() const override;
  HeadSite head_site() override;
  // Each part's HF init (deterministic per seed and parameter name); the text body's covers the heads'.
  void init_weights(uint64_t seed) override;
  // Installs (or, with nullptr, removes) FSDP hooks on the vision tower, the audio encoder and the text body.
  void set_param_hooks(ParamHooks* hooks) override;
  SequenceHooks* sequence_hooks() const override;

  // Text embeddings, the media embeddings written over their rows, the LM layers with deepstack feature k added at
  // the visual (image and video) rows after layer k. The encoders run on all of the batch's media, every call (also
  // with none: the parameter hooks see every group); an SP slice takes the output rows its masks mark, from the
  // batch's *_row_begin on, and backward gives the other rows zero gradient, so the encoders' parameter gradients
  // sum exactly over the SP group. Mask counts that differ from the encoders' output rows, overlapping masks and
  // bad shapes are InputErrors. With save the output's saved carries the text body's saved values and the
  // encoders' (VisionTower::Saved, AudioEncoder::Saved; empty for a frozen encoder): the body and its encoders keep
  // nothing of the micro-batch.
  BodyOutput forward(const MultimodalBatch& batch, bool save) override;
  // Inference over a whole-row batch, keeping nothing: the input embeddings forward builds (media rows written over
  // the token embeddings) and the callback that adds the deepstack features after the first decoder layers, for
  // TextBody::forward_cached.
  struct InputEmbeds {
    Tensor embeds;
    TextBody::LayerCallback after_layer;
  };
  InputEmbeds input_embeds(const MultimodalBatch& batch);
  // Through the text body into the encoders that are not frozen, consuming saved (the encoders' Saved included).
  // The embedding table gets no gradient from the media rows.
  void backward(std::unique_ptr<BodySaved> saved, Tensor d_hidden, float aux_grad_scale) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Qwen3-VL / Qwen3-Omni thinker for conditional generation: the multimodal body with the LM head
// (lm_head.weight for Qwen3-VL, thinker.lm_head.weight for Omni) on token cross-entropy over SFT micro-batches
// (tests, fixtures and tools). forward returns the pass, saved values included, and backward consumes it: the
// model keeps nothing of a micro-batch.
class MultimodalLM {
 public:
  MultimodalLM(const ThinkerConfig& config, const MultimodalOptions& options);
  ~MultimodalLM();
  MultimodalLM(const MultimodalLM&) = delete;
  MultimodalLM& operator=(const MultimodalLM&) = delete;

  const ThinkerConfig& config() const { return body_.config(); }
  ParamStore& params() { return body_.params(); }
  MultimodalBody& body() { return body_; }
  TextBody& language_model() { return body_.language_model(); }
  LmHead& head() { return head_; }
  VisionTower& vision() { return body_.vision(); }
  AudioEncoder* audio() { return body_.audio(); }

  void init_weights(uint64_t seed) { body_.init_weights(seed); }
  void set_param_hooks(ParamHooks* hooks);

  // The body, then the loss: the pass holds its ForwardStats and, with save, what its backward needs. logits_out,
  // when non-null, receives the [S, V] f32 logits.
  SftPass forward(const MultimodalBatch& batch, bool save, Tensor* logits_out = nullptr);
  // Backward of a pass, consuming it (scales as CausalLM::backward). Parameter grads accumulate.
  void backward(SftPass&& pass, float ce_grad_scale, float aux_grad_scale);

 private:
  MultimodalBody body_;
  LmHead head_;
};

}  // namespace veomni
