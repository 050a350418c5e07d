// The Qwen3-Omni audio encoder (transformers' Qwen3OmniMoeAudioEncoder): mel features -> audio embeddings and back.
// It follows the layer contract of model/decoder_layer.h: forward returns what backward needs (the layout of the
// clips included) as an AudioEncoder::Saved value that backward consumes; the encoder keeps nothing of a micro-batch.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "model/audio/audio_conv_stem.h"
#include "model/audio/audio_encoder_config.h"
#include "model/audio/audio_encoder_layer.h"
#include "model/audio/audio_layout.h"
#include "model/layers/biased_linear.h"
#include "model/layers/layer_norm.h"
#include "model/param.h"
#include "model/parallel_hooks.h"

namespace veomni {

struct AudioEncoderOptions {
  Device device = Device::cpu();
  DType compute_dtype = DType::F32;  // parameter/activation dtype for compute
  ParamHooks* param_hooks = nullptr;  // FSDP; null: single process, values materialised at construction
  bool materialize = true;            // false: no values at construction (they come deferred, see ModelOptions)
};

class AudioEncoder {
 public:
  // What backward needs, as one forward left it. Empty (kept false) when forward ran with save = false; backward
  // of an empty Saved is an internal error.
  struct Saved {
    bool kept = false;   // forward ran with save = true
    AudioLayout layout;  // chunks, tokens and attention windows of the clips
    Tensor token_ids;    // layout.token_rows on the device (i64): gathers the tokens from the padded grid
    AudioConvStem::Saved stem;
    std::vector<AudioEncoderLayer::Saved> layers;  // one per layer
    LayerNorm::Saved ln_post;
    BiasedLinear::Saved proj1, proj2;
    Tensor proj1_out;  // the GELU's input
  };
  struct Output {
    Tensor out;   // [sum of tokens per clip, output_dim] in options.compute_dtype
    Saved saved;  // empty unless save
  };

  // Registers every parameter under `{config.param_prefix}...` (transformers' names) in `store`, which may hold
  // other towers too, in three kinds of group: "audio.conv" (conv2d1-3, conv_out), "audio.layers.{i}" and
  // "audio.head" (ln_post, proj1, proj2). Without parameter hooks its own parameters are materialised (zeros) on
  // options.device in options.compute_dtype. The store must outlive the encoder.
  AudioEncoder(ParamStore& store, const AudioEncoderConfig& config, const AudioEncoderOptions& options = {});
  ~AudioEncoder();
  AudioEncoder(const AudioEncoder&) = delete;
  AudioEncoder& operator=(const AudioEncoder&) = delete;

  const AudioEncoderConfig& config() const;
  // This encoder's parameters, in registration order, and its group names.
  const std::vector<Parameter*>& parameters() const;
  std::vector<std::string> group_names() const;
  // Installs (or, with nullptr, removes) FSDP hooks after construction.
  void set_param_hooks(ParamHooks* hooks);

  // transformers' _init_weights: normal(0, initializer_range) for conv and linear weights, zero biases, LayerNorm
  // weight one and bias zero. Deterministic for a seed, independent of the parallel layout.
  void init_weights(uint64_t seed);

  // input_features [sum(feature_lengths), num_mel_bins] (any device, a float dtype): the clips' mel frames one
  // after another, as the dataset stores them. Returns the audio embeddings [sum of tokens per clip, output_dim]
  // in options.compute_dtype, clip after clip (clip i gives audio_output_length(feature_lengths[i]) rows), and
  // when save what backward needs (saved.layout: the clips' layout). No clips gives [0, output_dim] (the hooks
  // still see every group, so FSDP ranks without audio stay in step). Bad shapes or lengths are InputErrors.
  Output forward(const Tensor& input_features, const std::vector<int64_t>& feature_lengths, bool save = true) const;
  // Backward of the forward that returned `saved`, which it consumes (saved is empty afterwards, and nothing of
  // that forward remains): d_out like forward's out. Parameter grads accumulate.
  void backward(Saved&& saved, const Tensor& d_out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace veomni
