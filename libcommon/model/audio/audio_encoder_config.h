// The Qwen3-Omni audio encoder's configuration, read from thinker_config.audio_config of a HF config.json.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace veomni {

struct AudioEncoderConfig {
  // Prefix of every parameter name (Qwen3OmniMoeForConditionalGeneration -> thinker -> audio_tower).
  std::string param_prefix = "thinker.audio_tower.";
  // Defaults are transformers 5.17's Qwen3OmniMoeAudioEncoderConfig.
  int64_t num_mel_bins = 128;
  int64_t d_model = 1280;
  int64_t encoder_layers = 32;
  int64_t encoder_attention_heads = 20;
  int64_t encoder_ffn_dim = 5120;
  std::string activation_function = "gelu";  // of the layers' MLP and proj1 -> proj2; the convs always use erf GELU
  int64_t max_source_positions = 1500;       // rows of the sinusoid table: an upper bound on tokens per chunk
  int64_t n_window = 50;                     // chunks of 2 * n_window mel frames
  int64_t n_window_infer = 800;              // attention windows span n_window_infer / (2 * n_window) chunks
  int64_t conv_chunksize = 500;              // transformers' memory knob for the convs; no effect on results
  int64_t downsample_hidden_size = 480;      // channels of the three Conv2d
  int64_t output_dim = 3584;                 // the thinker's text hidden size
  double initializer_range = 0.02;
  double layer_norm_eps = 1e-5;  // nn.LayerNorm's default: transformers passes none

  int64_t head_dim() const { return d_model / encoder_attention_heads; }
  int64_t chunk_frames() const { return 2 * n_window; }
  // Mel bins left after the three stride-2 convolutions: ((m+1)/2 + 1)/2 + 1)/2 (16 for 128).
  int64_t conv_freq_bins() const { return (((num_mel_bins + 1) / 2 + 1) / 2 + 1) / 2; }
  // Input features of conv_out: channels x remaining mel bins.
  int64_t conv_out_features() const { return downsample_hidden_size * conv_freq_bins(); }
  // Chunks per attention window (transformers: n_window_infer // (n_window * 2)).
  int64_t chunks_per_window() const { return n_window_infer / chunk_frames(); }
  bool tanh_gelu() const { return activation_function == "gelu_pytorch_tanh"; }
};

// Parses an audio_config object; errors name `source` and the key. Absent keys take transformers' defaults.
AudioEncoderConfig audio_encoder_config_from_json(const nlohmann::json& audio_config, const std::string& source);
// From a config.json (file, or directory holding one) of model_type qwen3_omni_moe (thinker_config.audio_config),
// qwen3_omni_moe_thinker (audio_config) or qwen3_omni_moe_audio_encoder (the object itself). Others: InputError.
AudioEncoderConfig load_audio_encoder_config(const std::string& path);
// The checks audio_encoder_config_from_json makes, for a config built in code; errors name `source`.
void validate_audio_encoder_config(const AudioEncoderConfig& config, const std::string& source);

}  // namespace veomni
