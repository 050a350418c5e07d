// Reads and validates the code2wav_config of a Qwen3-Omni HF config.json (transformers 5.x).
#include "model/code2wav/code2wav_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"
#include "io/json_keys.h"

namespace veomni {

namespace {

double rope_theta_of(const nlohmann::json& object, const JsonKeys& keys, double fallback) {
  if (keys.has("rope_theta")) return keys.number("rope_theta", fallback);
  if (object.contains("rope_parameters") && object["rope_parameters"].is_object())
    return JsonKeys(object["rope_parameters"], "rope_parameters").number("rope_theta", fallback);
  return fallback;
}

}  // namespace

int64_t Code2WavConfig::total_upsample() const {
  int64_t product = 1;
  for (int64_t r : upsampling_ratios) product *= r;
  for (int64_t r : upsample_rates) product *= r;
  return product;
}

int64_t Code2WavConfig::waveform_samples(int64_t frames) const {
  int64_t length = frames;
  for (int64_t r : upsampling_ratios) length *= r;
  // A block's transposed convolution (kernel 2r, stride r) keeps (L-1)*r + 2r - 2r samples of L inputs.
  for (int64_t r : upsample_rates) length = length > 0 ? (length - 1) * r : 0;
  return length;
}

void validate_code2wav_config(const Code2WavConfig& c, const std::string& source) {
  require_positive_key(c.codebook_size, "codebook_size", source);
  require_positive_key(c.hidden_size, "hidden_size", source);
  require_positive_key(c.num_attention_heads, "num_attention_heads", source);
  require_positive_key(c.num_key_value_heads, "num_key_value_heads", source);
  require_positive_key(c.sliding_window, "sliding_window", source);
  require_positive_key(c.intermediate_size, "intermediate_size", source);
  require_positive_key(c.num_hidden_layers, "num_hidden_layers", source);
  require_positive_key(c.num_quantizers, "num_quantizers", source);
  require_positive_key(c.decoder_dim, "decoder_dim", source);
  VEOMNI_INPUT_CHECK(c.hidden_size % c.num_attention_heads == 0 && c.head_dim() % 2 == 0,
                     "{}: key 'hidden_size' ({}) must be an even multiple of num_attention_heads ({})", source,
                     c.hidden_size, c.num_attention_heads);
  VEOMNI_INPUT_CHECK(c.num_attention_heads % c.num_key_value_heads == 0,
                     "{}: key 'num_attention_heads' ({}) is not a multiple of num_key_value_heads ({})", source,
                     c.num_attention_heads, c.num_key_value_heads);
  VEOMNI_INPUT_CHECK(c.hidden_act == "silu", "{}: key 'hidden_act': \"{}\" is not supported (\"silu\")", source,
                     c.hidden_act);
  VEOMNI_INPUT_CHECK(!c.upsample_rates.empty(), "{}: key 'upsample_rates' is empty", source);
  for (int64_t r : c.upsample_rates) require_positive_key(r, "upsample_rates", source);
  for (int64_t r : c.upsampling_ratios) require_positive_key(r, "upsampling_ratios", source);
  const auto blocks = static_cast<int64_t>(c.upsample_rates.size());
  VEOMNI_INPUT_CHECK(blocks < 62 && c.decoder_dim % (int64_t{1} << blocks) == 0,
                     "{}: key 'decoder_dim' ({}) must be divisible by 2^{} (one halving per upsample_rates entry)",
                     source, c.decoder_dim, blocks);
}

Code2WavConfig code2wav_config_from_json(const nlohmann::json& object, const std::string& source) {
  VEOMNI_INPUT_CHECK(object.is_object(), "{}: the code2wav config must be a JSON object, got {}", source,
                     object.dump());
  const JsonKeys keys(object, source);
  VEOMNI_INPUT_CHECK(!object.value("attention_bias", false), "{}: key 'attention_bias': true is not supported",
                     source);
  Code2WavConfig c;
  c.codebook_size = keys.integer("codebook_size", c.codebook_size);
  c.hidden_size = keys.integer("hidden_size", c.hidden_size);
  c.max_position_embeddings = keys.integer("max_position_embeddings", c.max_position_embeddings);
  c.rope_theta = rope_theta_of(object, keys, c.rope_theta);
  c.num_attention_heads = keys.integer("num_attention_heads", c.num_attention_heads);
  c.num_key_value_heads = keys.integer("num_key_value_heads", c.num_key_value_heads);
  c.sliding_window = keys.integer("sliding_window", c.sliding_window);
  c.intermediate_size = keys.integer("intermediate_size", c.intermediate_size);
  c.hidden_act = keys.string("hidden_act", c.hidden_act);
  c.layer_scale_initial_scale = keys.number("layer_scale_initial_scale", c.layer_scale_initial_scale);
  c.rms_norm_eps = keys.number("rms_norm_eps", c.rms_norm_eps);
  c.num_hidden_layers = keys.integer("num_hidden_layers", c.num_hidden_layers);
  c.num_quantizers = keys.integer("num_quantizers", c.num_quantizers);
  c.upsample_rates = keys.integers("upsample_rates", c.upsample_rates);
  c.upsampling_ratios = keys.integers("upsampling_ratios", c.upsampling_ratios);
  c.decoder_dim = keys.integer("decoder_dim", c.decoder_dim);
  validate_code2wav_config(c, source);
  return c;
}

Code2WavConfig load_code2wav_config(const std::string& path) {
  const std::string file = std::filesystem::is_directory(path) ? path + "/config.json" : path;
  const nlohmann::json root = read_json_file(file);
  const JsonKeys keys(root, file);
  const std::string model_type = keys.string("model_type", "");
  VEOMNI_INPUT_CHECK(model_type == "qwen3_omni_moe",
                     "{}: key 'model_type': \"{}\" has no code2wav (expected qwen3_omni_moe)", file, model_type);
  VEOMNI_INPUT_CHECK(keys.has("code2wav_config"),
                     "{}: no key 'code2wav_config' (a Qwen3-Omni model saved without its speech stages)", file);
  return code2wav_config_from_json(keys.object("code2wav_config"), file + " code2wav_config");
}

}  // namespace veomni
