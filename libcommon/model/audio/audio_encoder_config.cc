// Reads and validates the audio_config of a Qwen3-Omni HF config.json (transformers 5.x).
#include "model/audio/audio_encoder_config.h"

#include <filesystem>
#include <utility>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"
#include "io/json_keys.h"

namespace veomni {

namespace {

using nlohmann::json;

}  // namespace

void validate_audio_encoder_config(const AudioEncoderConfig& c, const std::string& source) {
  require_positive_key(c.num_mel_bins, "num_mel_bins", source);
  require_positive_key(c.d_model, "d_model", source);
  require_positive_key(c.encoder_layers, "encoder_layers", source);
  require_positive_key(c.encoder_attention_heads, "encoder_attention_heads", source);
  require_positive_key(c.encoder_ffn_dim, "encoder_ffn_dim", source);
  require_positive_key(c.max_source_positions, "max_source_positions", source);
  require_positive_key(c.downsample_hidden_size, "downsample_hidden_size", source);
  require_positive_key(c.output_dim, "output_dim", source);
  VEOMNI_INPUT_CHECK(c.d_model % c.encoder_attention_heads == 0,
                     "{}: key 'd_model' ({}) is not a multiple of encoder_attention_heads ({})", source, c.d_model,
                     c.encoder_attention_heads);
  // SinusoidsPositionEmbedding needs an even width and divides by channels/2 - 1.
  VEOMNI_INPUT_CHECK(c.d_model % 2 == 0 && c.d_model >= 4, "{}: key 'd_model' must be even and at least 4, got {}",
                     source, c.d_model);
  // transformers hard-codes 13 tokens per full chunk (_get_feat_extract_output_lengths), which is what three
  // stride-2 convolutions make of 100 frames only; data/audio_length.h counts tokens the same way.
  VEOMNI_INPUT_CHECK(c.n_window == 50,
                     "{}: key 'n_window' must be 50 (transformers counts 13 tokens per 100-frame chunk), got {}",
                     source, c.n_window);
  VEOMNI_INPUT_CHECK(c.n_window_infer >= c.chunk_frames(),
                     "{}: key 'n_window_infer' ({}) must be at least 2 * n_window = {} (an attention window spans "
                     "n_window_infer // (2 * n_window) chunks)",
                     source, c.n_window_infer, c.chunk_frames());
  VEOMNI_INPUT_CHECK(c.activation_function == "gelu" || c.activation_function == "gelu_pytorch_tanh",
                     "{}: key 'activation_function': \"{}\" is not supported (\"gelu\" or \"gelu_pytorch_tanh\")",
                     source, c.activation_function);
  // One chunk's tokens index the sinusoid table.
  VEOMNI_INPUT_CHECK(c.max_source_positions >= 13,
                     "{}: key 'max_source_positions' ({}) is below the 13 tokens of one chunk", source,
                     c.max_source_positions);
}

AudioEncoderConfig audio_encoder_config_from_json(const nlohmann::json& audio_config, const std::string& source) {
  VEOMNI_INPUT_CHECK(audio_config.is_object(), "{}: the audio config must be a JSON object, got {}", source,
                     audio_config.dump());
  const JsonKeys keys(audio_config, source);
  AudioEncoderConfig c;
  c.num_mel_bins = keys.integer("num_mel_bins", c.num_mel_bins);
  c.d_model = keys.integer("d_model", c.d_model);
  c.encoder_layers = keys.integer("encoder_layers", c.encoder_layers);
  c.encoder_attention_heads = keys.integer("encoder_attention_heads", c.encoder_attention_heads);
  c.encoder_ffn_dim = keys.integer("encoder_ffn_dim", c.encoder_ffn_dim);
  c.activation_function = keys.string("activation_function", c.activation_function);
  c.max_source_positions = keys.integer("max_source_positions", c.max_source_positions);
  c.n_window = keys.integer("n_window", c.n_window);
  c.n_window_infer = keys.integer("n_window_infer", c.n_window_infer);
  c.conv_chunksize = keys.integer("conv_chunksize", c.conv_chunksize);
  c.downsample_hidden_size = keys.integer("downsample_hidden_size", c.downsample_hidden_size);
  c.output_dim = keys.integer("output_dim", c.output_dim);
  c.initializer_range = keys.number("initializer_range", c.initializer_range);
  validate_audio_encoder_config(c, source);
  return c;
}

AudioEncoderConfig load_audio_encoder_config(const std::string& path) {
  const std::string file = std::filesystem::is_directory(path) ? path + "/config.json" : path;
  const json root = read_json_file(file);
  const JsonKeys keys(root, file);
  const std::string model_type = keys.string("model_type", "");
  AudioEncoderConfig c;
  if (model_type == "qwen3_omni_moe") {
    const json& thinker = keys.object("thinker_config");
    c = audio_encoder_config_from_json(JsonKeys(thinker, file + " thinker_config").object("audio_config"),
                                       file + " thinker_config.audio_config");
    c.param_prefix = "thinker.audio_tower.";
  } else if (model_type == "qwen3_omni_moe_thinker") {
    c = audio_encoder_config_from_json(keys.object("audio_config"), file + " audio_config");
    c.param_prefix = "audio_tower.";
  } else if (model_type == "qwen3_omni_moe_audio_encoder") {
    c = audio_encoder_config_from_json(root, file);
    c.param_prefix = "";
  } else {
    throw InputError(fmt::format("{}: key 'model_type': \"{}\" has no audio encoder (expected qwen3_omni_moe, "
                                 "qwen3_omni_moe_thinker or qwen3_omni_moe_audio_encoder)",
                                 file, model_type));
  }
  return c;
}

}  // namespace veomni
