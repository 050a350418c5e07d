// Reads, validates and writes the HuggingFace config.json of Qwen3 and Qwen3-MoE models (transformers 5.x form).
#include "model/model_config.h"

#include <spdlog/fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "io/json_file.h"

namespace veomni {

namespace {

using nlohmann::json;

constexpr const char* kQwen3 = "qwen3";
constexpr const char* kQwen3Moe = "qwen3_moe";

// Reads typed keys of one config.json object; an absent or null key yields the fallback (as Python's None does
// for transformers' config classes). Errors name the source and the key.
class ConfigReader {
 public:
  ConfigReader(const json& object, const std::string& source) : object_(object), source_(source) {}

  bool has(const char* key) const { return object_.contains(key) && !object_.at(key).is_null(); }
  const json& at(const char* key) const { return object_.at(key); }

  int64_t integer(const char* key, int64_t fallback) const {
    if (!has(key)) return fallback;
    const json& v = at(key);
    if (!v.is_number_integer()) throw type_error(key, "an integer", v);
    return v.get<int64_t>();
  }
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = at(key);
    if (!v.is_number()) throw type_error(key, "a number", v);
    return v.get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = at(key);
    if (!v.is_boolean()) throw type_error(key, "true or false", v);
    return v.get<bool>();
  }
  std::string string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const json& v = at(key);
    if (!v.is_string()) throw type_error(key, "a string", v);
    return v.get<std::string>();
  }
  std::vector<int64_t> integer_list(const char* key) const {
    if (!has(key)) return {};
    const json& v = at(key);
    if (!v.is_array()) throw type_error(key, "a list of integers", v);
    std::vector<int64_t> out;
    for (const json& item : v) {
      if (!item.is_number_integer()) throw type_error(key, "a list of integers", v);
      out.push_back(item.get<int64_t>());
    }
    return out;
  }
  const json& object(const char* key) const {
    const json& v = at(key);
    if (!v.is_object()) throw type_error(key, "an object", v);
    return v;
  }

  InputError error(const std::string& key, const std::string& message) const {
    return InputError(fmt::format("{}: key '{}': {}", source_, key, message));
  }

 private:
  InputError type_error(const std::string& key, const char* expected, const json& value) const {
    return error(key, fmt::format("expected {}, got {}", expected,
                                  quoted_excerpt(value.dump(-1, ' ', false, json::error_handler_t::replace))));
  }

  const json& object_;
  const std::string& source_;
};

// RoPE variants other than the plain one change the frequencies; only "default" is implemented.
void check_rope_variant(const ConfigReader& reader, const char* key, const json& rope) {
  for (const char* type_key : {"rope_type", "type"}) {
    if (!rope.contains(type_key) || rope.at(type_key).is_null()) continue;
    const json& type = rope.at(type_key);
    if (!type.is_string() || type.get<std::string>() != "default")
      throw reader.error(fmt::format("{}.{}", key, type_key),
                         fmt::format("RoPE type {} is not supported (only \"default\")", type.dump()));
  }
  if (rope.contains("partial_rotary_factor") && !rope.at("partial_rotary_factor").is_null()) {
    const json& factor = rope.at("partial_rotary_factor");
    if (!factor.is_number() || factor.get<double>() != 1.0)
      throw reader.error(fmt::format("{}.partial_rotary_factor", key),
                         fmt::format("partial rotary embeddings ({}) are not supported (only 1.0)", factor.dump()));
  }
}

// transformers 5.x keeps θ in rope_parameters.rope_theta; older files have a top-level rope_theta (and maybe a
// rope_scaling dict). rope_parameters wins when both are present, as in PreTrainedConfig.convert_rope_params_to_dict.
double read_rope_theta(const ConfigReader& reader) {
  double theta = reader.number("rope_theta", 10000.0);
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!reader.has(key)) continue;
    const json& rope = reader.object(key);
    check_rope_variant(reader, key, rope);
    if (rope.contains("rope_theta") && !rope.at("rope_theta").is_null()) {
      if (!rope.at("rope_theta").is_number())
        throw reader.error(fmt::format("{}.rope_theta", key),
                           fmt::format("expected a number, got {}", rope.at("rope_theta").dump()));
      theta = rope.at("rope_theta").get<double>();
    }
  }
  return theta;
}

// Qwen3MoeConfig maps num_experts onto num_local_experts (attribute_map); older files and VeOmni's toys spell it
// num_experts. Both may be present (we write both), but then they must agree.
int64_t read_expert_count(const ConfigReader& reader) {
  const int64_t local = reader.integer("num_local_experts", -1);
  const int64_t plain = reader.integer("num_experts", -1);
  if (local >= 0 && plain >= 0 && local != plain)
    throw reader.error("num_local_experts",
                       fmt::format("{} disagrees with num_experts = {}; keep one of the two keys", local, plain));
  if (local >= 0) return local;
  if (plain >= 0) return plain;
  return 128;
}

// Features transformers has for these models that this toolkit does not implement: refuse them by name.
void reject_unsupported_features(const ConfigReader& reader) {
  const std::string act = reader.string("hidden_act", "silu");
  if (act != "silu") throw reader.error("hidden_act", fmt::format("activation \"{}\" is not supported (only \"silu\")", act));
  if (reader.boolean("use_sliding_window", false))
    throw reader.error("use_sliding_window", "sliding-window attention is not supported; set it to false");
  const double dropout = reader.number("attention_dropout", 0.0);
  if (dropout != 0.0)
    throw reader.error("attention_dropout", fmt::format("attention dropout {} is not supported (only 0.0)", dropout));
  if (reader.has("layer_types")) {
    const json& types = reader.at("layer_types");
    if (!types.is_array()) throw reader.error("layer_types", fmt::format("expected a list, got {}", types.dump()));
    for (const json& type : types)
      if (type != "full_attention")
        throw reader.error("layer_types", fmt::format("layer type {} is not supported (only \"full_attention\")", type.dump()));
  }
}

// Keys this file reads or writes itself; everything else of config.json travels in extra_json.
const std::set<std::string>& interpreted_keys() {
  static const std::set<std::string> keys = {
      "architectures", "model_type", "transformers_version", "vocab_size", "hidden_size", "intermediate_size",
      "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act", "rms_norm_eps",
      "rope_theta", "rope_parameters", "rope_scaling", "tie_word_embeddings", "initializer_range", "attention_bias",
      "attention_dropout", "use_sliding_window", "sliding_window", "layer_types", "max_position_embeddings", "dtype",
      "torch_dtype", "num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size",
      "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers", "router_aux_loss_coef", "output_router_logits"};
  return keys;
}

std::string uninterpreted_keys_json(const json& object) {
  json extra = json::object();
  for (const auto& [key, value] : object.items())
    if (!interpreted_keys().contains(key)) extra[key] = value;
  return extra.empty() ? std::string() : extra.dump();
}

void read_attention_and_sizes(const ConfigReader& reader, ModelConfig& c) {
  const bool moe = c.model_type == kQwen3Moe;
  // Defaults of transformers 5.x's Qwen3Config / Qwen3MoeConfig.
  c.vocab_size = reader.integer("vocab_size", 151936);
  c.hidden_size = reader.integer("hidden_size", moe ? 2048 : 4096);
  c.intermediate_size = reader.integer("intermediate_size", moe ? 6144 : 22016);
  c.num_hidden_layers = reader.integer("num_hidden_layers", moe ? 24 : 32);
  c.num_attention_heads = reader.integer("num_attention_heads", 32);
  c.num_key_value_heads = reader.integer("num_key_value_heads", moe ? 4 : c.num_attention_heads);
  const int64_t derived_head_dim = c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0;
  c.head_dim = reader.integer("head_dim", moe ? derived_head_dim : 128);
  c.rms_norm_eps = reader.number("rms_norm_eps", 1e-6);
  c.rope_theta = read_rope_theta(reader);
  c.tie_word_embeddings = reader.boolean("tie_word_embeddings", false);
  c.initializer_range = reader.number("initializer_range", 0.02);
  c.attention_bias = reader.boolean("attention_bias", false);
  c.max_position_embeddings = reader.integer("max_position_embeddings", 32768);
  c.dtype = reader.string("dtype", reader.string("torch_dtype", ""));
}

void read_experts(const ConfigReader& reader, ModelConfig& c) {
  c.num_experts = read_expert_count(reader);
  c.num_experts_per_tok = reader.integer("num_experts_per_tok", 8);
  c.moe_intermediate_size = reader.integer("moe_intermediate_size", 768);
  c.norm_topk_prob = reader.boolean("norm_topk_prob", false);
  c.decoder_sparse_step = reader.integer("decoder_sparse_step", 1);
  c.mlp_only_layers = reader.integer_list("mlp_only_layers");
  c.router_aux_loss_coef = reader.number("router_aux_loss_coef", 0.001);
  c.output_router_logits = reader.boolean("output_router_logits", false);
}

void check_positive(const std::string& source, const char* key, int64_t value) {
  VEOMNI_INPUT_CHECK(value > 0, "{}: key '{}': must be positive, got {}", source, key, value);
}

// Upper bounds far above every released model (the largest have ~16k hidden, ~53k intermediate, ~256k vocabulary,
// ~130 layers, 384 experts) that keep every size product within 64 bits and refuse a corrupt or hostile config
// before anything is allocated.
struct SizeBound {
  const char* key;
  int64_t value;
  int64_t max;
};

void check_size_bounds(const ModelConfig& c, const std::string& source) {
  std::vector<SizeBound> bounds = {{"vocab_size", c.vocab_size, int64_t{1} << 24},
                                   {"hidden_size", c.hidden_size, int64_t{1} << 17},
                                   {"intermediate_size", c.intermediate_size, int64_t{1} << 20},
                                   {"num_hidden_layers", c.num_hidden_layers, 1024},
                                   {"num_attention_heads", c.num_attention_heads, 1024},
                                   {"num_key_value_heads", c.num_key_value_heads, 1024},
                                   {"head_dim", c.head_dim, 4096},
                                   {"max_position_embeddings", c.max_position_embeddings, int64_t{1} << 32}};
  if (c.model_type == kQwen3Moe) {
    bounds.push_back({"num_local_experts", c.num_experts, int64_t{1} << 14});
    bounds.push_back({"moe_intermediate_size", c.moe_intermediate_size, int64_t{1} << 20});
    bounds.push_back({"decoder_sparse_step", c.decoder_sparse_step, 1024});
  }
  for (const SizeBound& b : bounds)
    VEOMNI_INPUT_CHECK(b.value <= b.max, "{}: key '{}': {} is more than {}, the largest this toolkit accepts", source,
                       b.key, b.value, b.max);
}

// a * b + c * d ..., false on overflow.
bool add_product(int64_t& total, std::initializer_list<int64_t> factors) {
  int64_t product = 1;
  for (int64_t f : factors)
    if (__builtin_mul_overflow(product, f, &product)) return false;
  return !__builtin_add_overflow(total, product, &total);
}

// The most parameters a config may describe: 2^41 (2.2 trillion, 4.4 TB in bf16 before any optimizer state).
constexpr int64_t kMaxParameters = int64_t{1} << 41;

void check_parameter_count(const ModelConfig& c, const std::string& source) {
  int64_t total = 0;
  bool ok = add_product(total, {c.vocab_size, c.hidden_size, c.tie_word_embeddings ? 1 : 2});
  int64_t layer = 0;
  ok = ok && add_product(layer, {c.hidden_size, c.q_size(), 2}) && add_product(layer, {c.hidden_size, c.kv_size(), 2});
  if (c.model_type == kQwen3Moe)
    ok = ok && add_product(layer, {c.num_experts, c.hidden_size, c.moe_intermediate_size, 3}) &&
         add_product(layer, {c.num_experts, c.hidden_size});
  else
    ok = ok && add_product(layer, {c.hidden_size, c.intermediate_size, 3});
  ok = ok && add_product(total, {layer, c.num_hidden_layers});
  VEOMNI_INPUT_CHECK(ok && total <= kMaxParameters,
                     "{}: the sizes describe a model of {} parameters (vocab_size {}, hidden_size {}, "
                     "intermediate_size {}, num_hidden_layers {}, num_attention_heads {}, head_dim {}{}), more than "
                     "the {} this toolkit accepts; check these keys",
                     source, ok ? fmt::format("{}", total) : std::string("more than 2^63"), c.vocab_size,
                     c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.num_attention_heads, c.head_dim,
                     c.model_type == kQwen3Moe ? fmt::format(", num_local_experts {}, moe_intermediate_size {}",
                                                             c.num_experts, c.moe_intermediate_size)
                                               : std::string(),
                     kMaxParameters);
}

void validate_experts(const ModelConfig& c, const std::string& source) {
  VEOMNI_INPUT_CHECK(c.num_experts > 0, "{}: key 'num_local_experts': a qwen3_moe model needs at least one expert, got {}",
                     source, c.num_experts);
  check_positive(source, "num_experts_per_tok", c.num_experts_per_tok);
  VEOMNI_INPUT_CHECK(c.num_experts_per_tok <= c.num_experts,
                     "{}: key 'num_experts_per_tok': {} exceeds the number of experts ({})", source,
                     c.num_experts_per_tok, c.num_experts);
  check_positive(source, "moe_intermediate_size", c.moe_intermediate_size);
  check_positive(source, "decoder_sparse_step", c.decoder_sparse_step);
  for (int64_t layer : c.mlp_only_layers)
    VEOMNI_INPUT_CHECK(layer >= 0 && layer < c.num_hidden_layers,
                       "{}: key 'mlp_only_layers': layer {} is out of range [0, {})", source, layer,
                       c.num_hidden_layers);
  VEOMNI_INPUT_CHECK(c.router_aux_loss_coef >= 0, "{}: key 'router_aux_loss_coef': must be >= 0, got {}", source,
                     c.router_aux_loss_coef);
}

}  // namespace

const std::vector<std::string>& supported_model_types() {
  static const std::vector<std::string> types = {kQwen3, kQwen3Moe};
  return types;
}

bool ModelConfig::layer_is_sparse(int64_t layer) const {
  if (num_experts <= 0 || decoder_sparse_step <= 0) return false;
  const bool dense_by_choice = std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end();
  return !dense_by_choice && (layer + 1) % decoder_sparse_step == 0;
}

void validate_model_config(const ModelConfig& c, const std::string& source) {
  const auto& types = supported_model_types();
  VEOMNI_INPUT_CHECK(std::find(types.begin(), types.end(), c.model_type) != types.end(),
                     "{}: key 'model_type': \"{}\" is not supported (supported: {})", source, c.model_type,
                     fmt::join(types, ", "));
  check_positive(source, "vocab_size", c.vocab_size);
  check_positive(source, "hidden_size", c.hidden_size);
  check_positive(source, "intermediate_size", c.intermediate_size);
  check_positive(source, "num_hidden_layers", c.num_hidden_layers);
  check_positive(source, "num_attention_heads", c.num_attention_heads);
  check_positive(source, "num_key_value_heads", c.num_key_value_heads);
  check_positive(source, "head_dim", c.head_dim);
  VEOMNI_INPUT_CHECK(c.num_attention_heads % c.num_key_value_heads == 0,
                     "{}: key 'num_key_value_heads': num_attention_heads ({}) must be a multiple of it ({})", source,
                     c.num_attention_heads, c.num_key_value_heads);
  VEOMNI_INPUT_CHECK(c.head_dim % 2 == 0, "{}: key 'head_dim': RoPE needs an even head_dim, got {}", source,
                     c.head_dim);
  VEOMNI_INPUT_CHECK(c.rms_norm_eps > 0, "{}: key 'rms_norm_eps': must be positive, got {}", source, c.rms_norm_eps);
  VEOMNI_INPUT_CHECK(c.rope_theta > 0, "{}: key 'rope_parameters.rope_theta': must be positive, got {}", source,
                     c.rope_theta);
  VEOMNI_INPUT_CHECK(c.initializer_range >= 0, "{}: key 'initializer_range': must be >= 0, got {}", source,
                     c.initializer_range);
  VEOMNI_INPUT_CHECK(!c.attention_bias,
                     "{}: key 'attention_bias': biased attention projections are not supported (set it to false)",
                     source);
  if (c.model_type == kQwen3Moe) validate_experts(c, source);
  else
    VEOMNI_INPUT_CHECK(c.num_experts == 0, "{}: key 'num_experts': a dense qwen3 model has no experts, got {}", source,
                       c.num_experts);
  check_positive(source, "max_position_embeddings", c.max_position_embeddings);
  check_size_bounds(c, source);
  check_parameter_count(c, source);
}

ModelConfig model_config_from_json(const json& object, const std::string& source) {
  VEOMNI_INPUT_CHECK(object.is_object(), "{}: a model config must be a JSON object, got {}", source,
                     object.type_name());
  const ConfigReader reader(object, source);
  const auto& types = supported_model_types();
  if (!reader.has("model_type"))
    throw reader.error("model_type", fmt::format("missing (supported: {})", fmt::join(types, ", ")));
  ModelConfig c;
  c.model_type = reader.string("model_type", "");
  VEOMNI_INPUT_CHECK(std::find(types.begin(), types.end(), c.model_type) != types.end(),
                     "{}: key 'model_type': \"{}\" is not supported (supported: {})", source, c.model_type,
                     fmt::join(types, ", "));
  reject_unsupported_features(reader);
  read_attention_and_sizes(reader, c);
  if (c.model_type == kQwen3Moe) read_experts(reader, c);
  c.extra_json = uninterpreted_keys_json(object);
  validate_model_config(c, source);
  return c;
}

ModelConfig load_model_config(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string file = fs::is_directory(path) ? (fs::path(path) / "config.json").string() : path;
  VEOMNI_INPUT_CHECK(fs::exists(file), "model config {} does not exist{}", file,
                     fs::is_directory(path) ? " (the directory has no config.json)" : "");
  return model_config_from_json(read_json_file(file), file);
}

json model_config_to_json(const ModelConfig& c, ModelHead head) {
  validate_model_config(c, "model config");
  const bool moe = c.model_type == kQwen3Moe;
  json out = c.extra_json.empty() ? json::object() : json::parse(c.extra_json);
  // transformers writes these with null values; keep the source's when it had them.
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"})
    if (!out.contains(key)) out[key] = nullptr;
  if (!out.contains("use_cache")) out["use_cache"] = true;
  set_hf_head_keys(out, c.model_type, head);
  out["model_type"] = c.model_type;
  out["vocab_size"] = c.vocab_size;
  out["hidden_size"] = c.hidden_size;
  out["intermediate_size"] = c.intermediate_size;
  out["num_hidden_layers"] = c.num_hidden_layers;
  out["num_attention_heads"] = c.num_attention_heads;
  out["num_key_value_heads"] = c.num_key_value_heads;
  out["head_dim"] = c.head_dim;  // a plain attribute for Qwen3MoeConfig, read by its attention layer
  out["hidden_act"] = "silu";
  out["rms_norm_eps"] = c.rms_norm_eps;
  out["rope_parameters"] = {{"rope_theta", c.rope_theta}, {"rope_type", "default"}};
  out["tie_word_embeddings"] = c.tie_word_embeddings;
  out["initializer_range"] = c.initializer_range;
  out["attention_bias"] = false;
  out["attention_dropout"] = 0.0;
  out["use_sliding_window"] = false;
  out["sliding_window"] = nullptr;
  out["max_position_embeddings"] = c.max_position_embeddings;
  if (!c.dtype.empty()) out["dtype"] = c.dtype;
  if (moe) {
    // 5.x saves num_local_experts; transformers 4.x only reads num_experts. Both keys load the same value in 5.x
    // (num_experts is mapped onto num_local_experts), so write both.
    out["num_local_experts"] = c.num_experts;
    out["num_experts"] = c.num_experts;
    out["num_experts_per_tok"] = c.num_experts_per_tok;
    out["moe_intermediate_size"] = c.moe_intermediate_size;
    out["norm_topk_prob"] = c.norm_topk_prob;
    out["decoder_sparse_step"] = c.decoder_sparse_step;
    out["mlp_only_layers"] = c.mlp_only_layers;
    out["router_aux_loss_coef"] = c.router_aux_loss_coef;
    out["output_router_logits"] = c.output_router_logits;
  } else {
    out["layer_types"] = std::vector<std::string>(static_cast<size_t>(c.num_hidden_layers), "full_attention");
    if (!out.contains("max_window_layers")) out["max_window_layers"] = 28;
  }
  return out;
}

void save_model_config(const ModelConfig& config, const std::string& path, ModelHead head) {
  write_json_file(path, model_config_to_json(config, head), 2);
}

}  // namespace veomni
