// Helpers of the speech-stage tests (CPU and GPU): seeded random parameter values and tiny Qwen3-Omni speech
// configs.
#pragma once
#include <cmath>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "model/code2wav/code2wav_config.h"
#include "model/param.h"

namespace veomni::speech_test {

// Normal values scaled by 1/sqrt(fan_in) for matrices, 1 + small noise for norms, small values for the rest
// (biases, layer scales, SnakeBeta's log-scale parameters), so that activations stay of order one.
inline void randomize(ParamStore& store, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const auto& p : store.all()) {
    float* v = p->value.data<float>();
    const bool is_norm = p->name.find("norm") != std::string::npos && p->shape.size() == 1;
    const double fan_in = p->shape.size() >= 2 ? static_cast<double>(p->value.numel() / p->shape[0]) : 1.0;
    for (int64_t i = 0; i < p->value.numel(); ++i) {
      const float n = normal(rng);
      if (is_norm)
        v[i] = 1.0f + 0.1f * n;
      else if (p->shape.size() >= 2)
        v[i] = static_cast<float>(n / std::sqrt(fan_in));
      else
        v[i] = 0.1f * n;
    }
  }
}

// A code2wav of a few thousand parameters: 3 quantizers of 10 codes, 2 sliding-window layers (window 3, grouped
// keys and values), upsampling 2 then decoder strides 3 and 2 (12 samples per frame).
inline Code2WavConfig tiny_code2wav_config() {
  Code2WavConfig c;
  c.codebook_size = 10;
  c.hidden_size = 16;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.sliding_window = 3;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_quantizers = 3;
  c.upsample_rates = {3, 2};
  c.upsampling_ratios = {2};
  c.decoder_dim = 8;
  return c;
}

// A talker_config object of a tiny talker: width 16, 4 experts, codec vocabulary 1100 (the last 1024 special, EOS
// 1090), a code predictor of 3 code groups over 20 codes, thinker width 24, one speaker.
inline nlohmann::json tiny_talker_json() {
  return {
      {"text_config",
       {{"hidden_size", 16}, {"head_dim", 8}, {"num_attention_heads", 2}, {"num_key_value_heads", 1},
        {"intermediate_size", 12}, {"num_hidden_layers", 2}, {"num_experts", 4}, {"num_experts_per_tok", 2},
        {"moe_intermediate_size", 6}, {"shared_expert_intermediate_size", 10}, {"norm_topk_prob", true},
        {"vocab_size", 1100}, {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000}}},
      {"code_predictor_config",
       {{"hidden_size", 16}, {"head_dim", 8}, {"num_attention_heads", 2}, {"num_key_value_heads", 1},
        {"intermediate_size", 24}, {"num_hidden_layers", 2}, {"vocab_size", 20}, {"rms_norm_eps", 1e-6},
        {"rope_theta", 1000000}}},
      {"num_code_groups", 3},
      {"thinker_hidden_size", 24},
      {"codec_eos_token_id", 1090},
      {"speaker_id", {{"ethan", 1080}}}};
}

}  // namespace veomni::speech_test
