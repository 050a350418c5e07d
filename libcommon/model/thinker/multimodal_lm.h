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
#include "model/thinker/thinker_config.h"
#include "model/vision/vision_tower.h"

namespace veomni {

// One packed micro-batch of a multimodal model.
struct MultimodalBatch {
  // input_ids i64 [S] with the media positions zeroed, target_ids (shifted, kIgnoreIndex where nothing is
  // predicted), position_ids [3, S] (i64 for Qwen3-VL, f32 for Qwen3-Omni), cu_seqlens.
  Batch text;
  // bool [S]; undefined means no such tokens. The image rows take the images' merged embeddings in order, the video
  // rows the videos'; the audio rows the audio encoder's output, clip after clip.
  Tensor image_mask, video_mask, audio_mask;
  Tensor pixel_values;  // [image patches, patch_dim], rows in the order of image_grids
  std::vector<VisionGrid> image_grids;
  Tensor pixel_values_videos;  // [video patches, patch_dim]
  std::vector<VisionGrid> video_grids;
  Tensor input_features;  // [sum(audio_feature_lengths), num_mel_bins] (Qwen3-Omni)
  std::vector<int64_t> audio_feature_lengths;
};

struct MultimodalOptions {
  ModelOptions lm;  // device, compute dtype, recompute of the LM layers (parameter and parallel hooks: not yet)
  bool freeze_vit = false;          // the vision tower runs without keeping activations and gets no gradient
  bool freeze_audio_tower = false;  // the same for the audio encoder
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

  // Text embeddings, the media embeddings written over their rows, the LM layers with deepstack feature k added at
  // the visual (image and video) rows after layer k, the loss. Mask counts that differ from the encoders' output
  // rows, overlapping masks and bad shapes are InputErrors. Keeps what backward needs unless only_loss;
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
