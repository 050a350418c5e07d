// The Qwen3-Omni code2wav configuration (codec codes -> 24 kHz waveform), read from code2wav_config of config.json.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace veomni {

struct Code2WavConfig {
  // Prefix of every parameter name (Qwen3OmniMoeForConditionalGeneration -> code2wav).
  std::string param_prefix = "code2wav.";
  // Defaults are transformers 5.17's Qwen3OmniMoeCode2WavConfig.
  int64_t codebook_size = 2048;
  int64_t hidden_size = 1024;
  int64_t max_position_embeddings = 8000;
  double rope_theta = 10000.0;
  int64_t num_attention_heads = 16;
  int64_t num_key_value_heads = 16;
  int64_t sliding_window = 72;  // every pre-transformer layer attends to the last sliding_window positions
  int64_t intermediate_size = 3072;
  std::string hidden_act = "silu";
  double layer_scale_initial_scale = 0.01;
  double rms_norm_eps = 1e-5;
  int64_t num_hidden_layers = 8;
  int64_t num_quantizers = 16;
  std::vector<int64_t> upsample_rates = {8, 5, 4, 3};  // the decoder blocks' transposed-convolution strides
  std::vector<int64_t> upsampling_ratios = {2, 2};     // the upsample stages after the pre-transformer
  int64_t decoder_dim = 1536;

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  // Channels entering decoder block i (decoder_dim / 2^i); block i leaves half as many.
  int64_t decoder_channels(int64_t block) const { return decoder_dim >> block; }
  // Waveform samples per code frame: the product of upsampling_ratios and upsample_rates (transformers'
  // total_upsample). A decode of T frames gives waveform_samples(T), a little fewer than T * total_upsample().
  int64_t total_upsample() const;
  // Samples a forward over `frames` code frames returns (the causal transposed convolutions of the decoder blocks
  // drop stride samples each).
  int64_t waveform_samples(int64_t frames) const;
};

// Parses a code2wav_config object; errors name `source` and the key. Absent keys take transformers' defaults.
Code2WavConfig code2wav_config_from_json(const nlohmann::json& code2wav_config, const std::string& source);
// From a config.json (file, or directory holding one) of model_type qwen3_omni_moe (its code2wav_config); a model
// without one, or another model type, is an InputError.
Code2WavConfig load_code2wav_config(const std::string& path);
void validate_code2wav_config(const Code2WavConfig& config, const std::string& source);

}  // namespace veomni
