// Reads, validates and writes the HuggingFace config.json of Qwen3 and Qwen3-MoE models (transformers 5.x form).
#include "model/model_config.h"

#include <spdlog/fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "io/json_config.h"
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

// The plain keys of config.json: one row each, with the model types that have it, transformers 5.x's defaults for
// qwen3 and qwen3_moe, and its checks. Reading, writing, the positivity and size checks and the comparison of a
// resumed run's model all follow this table. Keys with more to them (model_type, rope, the two spellings of the
// expert count and of dtype, the features refused by name) are handled below it.
enum class KeyScope { All, Moe };

struct KeyChecks {
  bool positive = false;     // must be > 0
  int64_t max = 0;           // an upper bound far above every released model (0: none); keeps size products in 64 bits
  bool architecture = true;  // part of the model's shape: a checkpoint resumed under another value is refused
};

struct ModelKeyRow {
  KeyScope scope;
  ConfigValue dense_default, moe_default;
  KeyChecks checks;
};

class ModelKeyTable {
 public:
  template <class T, class Accessor>
  ModelKeyTable& add(const char* key, Accessor accessor, KeyScope scope, T dense_default, T moe_default,
                     KeyChecks checks, const char* help) {
    schema_.add(key, accessor, help);
    rows_.push_back({scope, ConfigValue(std::in_place_type<T>, dense_default),
                     ConfigValue(std::in_place_type<T>, moe_default), checks});
    return *this;
  }
  const ConfigSchema<ModelConfig>& schema() const { return schema_; }
  const std::vector<ModelKeyRow>& rows() const { return rows_; }
  bool applies(size_t i, const std::string& model_type) const {
    return rows_[i].scope == KeyScope::All || model_type == kQwen3Moe;
  }

 private:
  ConfigSchema<ModelConfig> schema_;
  std::vector<ModelKeyRow> rows_;
};

#define VEOMNI_MODEL_KEY(table, member, ...) \
  table.add(#member, [](auto& c) -> auto& { return c.member; }, __VA_ARGS__)

constexpr int64_t kMaxSize = int64_t{1} << 20;

ModelKeyTable build_model_key_table() {
  ModelKeyTable t;
  const KeyChecks sizes{.positive = true, .max = kMaxSize};
  const KeyChecks not_architecture{.architecture = false};
  VEOMNI_MODEL_KEY(t, vocab_size, KeyScope::All, int64_t{151936}, int64_t{151936}, {.positive = true, .max = int64_t{1} << 24}, "vocabulary size");
  VEOMNI_MODEL_KEY(t, hidden_size, KeyScope::All, int64_t{4096}, int64_t{2048}, {.positive = true, .max = int64_t{1} << 17}, "model width");
  VEOMNI_MODEL_KEY(t, intermediate_size, KeyScope::All, int64_t{22016}, int64_t{6144}, sizes, "dense MLP width");
  VEOMNI_MODEL_KEY(t, num_hidden_layers, KeyScope::All, int64_t{32}, int64_t{24}, {.positive = true, .max = 1024}, "decoder layers");
  VEOMNI_MODEL_KEY(t, num_attention_heads, KeyScope::All, int64_t{32}, int64_t{32}, {.positive = true, .max = 1024}, "query heads");
  // Absent: num_attention_heads for qwen3, 4 for qwen3_moe (read_derived_defaults).
  VEOMNI_MODEL_KEY(t, num_key_value_heads, KeyScope::All, int64_t{0}, int64_t{4}, {.positive = true, .max = 1024}, "key/value heads");
  // Absent: 128 for qwen3 (Qwen3Config.head_dim); hidden_size / num_attention_heads for qwen3_moe.
  VEOMNI_MODEL_KEY(t, head_dim, KeyScope::All, int64_t{128}, int64_t{0}, {.positive = true, .max = 4096}, "width of one head");
  VEOMNI_MODEL_KEY(t, rms_norm_eps, KeyScope::All, 1e-6, 1e-6, {}, "RMSNorm epsilon");
  VEOMNI_MODEL_KEY(t, tie_word_embeddings, KeyScope::All, false, false, {}, "the LM head shares the embedding");
  VEOMNI_MODEL_KEY(t, initializer_range, KeyScope::All, 0.02, 0.02, not_architecture, "std of the random initialisation");
  VEOMNI_MODEL_KEY(t, attention_bias, KeyScope::All, false, false, not_architecture, "biased q/k/v/o projections (refused)");
  VEOMNI_MODEL_KEY(t, max_position_embeddings, KeyScope::All, int64_t{32768}, int64_t{32768}, {.positive = true, .max = int64_t{1} << 32, .architecture = false}, "longest position (kept, not used by training)");
  VEOMNI_MODEL_KEY(t, num_experts_per_tok, KeyScope::Moe, int64_t{8}, int64_t{8}, {.positive = true}, "experts each token is routed to");
  VEOMNI_MODEL_KEY(t, moe_intermediate_size, KeyScope::Moe, int64_t{768}, int64_t{768}, sizes, "expert MLP width");
  VEOMNI_MODEL_KEY(t, norm_topk_prob, KeyScope::Moe, false, false, {}, "renormalise the top-k routing weights");
  VEOMNI_MODEL_KEY(t, decoder_sparse_step, KeyScope::Moe, int64_t{1}, int64_t{1}, {.positive = true, .max = 1024}, "every this many layers is sparse");
  VEOMNI_MODEL_KEY(t, mlp_only_layers, KeyScope::Moe, std::vector<int64_t>{}, std::vector<int64_t>{}, {}, "layers kept dense");
  VEOMNI_MODEL_KEY(t, router_aux_loss_coef, KeyScope::Moe, 0.001, 0.001, {}, "weight of the load-balancing loss");
  VEOMNI_MODEL_KEY(t, output_router_logits, KeyScope::Moe, false, false, {}, "add the load-balancing loss");
  return t;
}

#undef VEOMNI_MODEL_KEY

const ModelKeyTable& model_keys() {
  static const ModelKeyTable table = build_model_key_table();
  return table;
}

// Keys of config.json read or written outside the table; everything neither has travels in extra_json.
const std::set<std::string>& special_keys() {
  static const std::set<std::string> keys = {
      "architectures", "model_type", "transformers_version", "hidden_act", "rope_theta", "rope_parameters",
      "rope_scaling", "attention_dropout", "use_sliding_window", "sliding_window", "layer_types", "dtype",
      "torch_dtype", "num_experts", "num_local_experts"};
  return keys;
}

bool interpreted_key(const std::string& key) {
  return special_keys().contains(key) || model_keys().schema().has_field(key);
}

std::string uninterpreted_keys_json(const json& object) {
  json extra = json::object();
  for (const auto& [key, value] : object.items())
    if (!interpreted_key(key)) extra[key] = value;
  return extra.empty() ? std::string() : extra.dump();
}

// The table's keys that the model type has: the type's defaults, then the file's values.
void read_table_keys(const json& object, const std::string& source, ModelConfig& c) {
  const ModelKeyTable& table = model_keys();
  const bool moe = c.model_type == kQwen3Moe;
  const auto applies = [&](size_t i) { return table.applies(i, c.model_type); };
  std::vector<ConfigAssignment> defaults;
  for (size_t i = 0; i < table.rows().size(); ++i)
    if (applies(i)) defaults.push_back({i, moe ? table.rows()[i].moe_default : table.rows()[i].dense_default, "default"});
  table.schema().apply(c, defaults);
  table.schema().apply(c, json_assignments(object, source, table.schema().fields(), applies));
}

// Defaults that depend on other keys, as transformers' config classes compute them.
void read_derived_defaults(const ConfigReader& reader, ModelConfig& c) {
  const bool moe = c.model_type == kQwen3Moe;
  if (!moe && !reader.has("num_key_value_heads")) c.num_key_value_heads = c.num_attention_heads;
  if (moe && !reader.has("head_dim"))
    c.head_dim = c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0;
}

void read_special_keys(const ConfigReader& reader, ModelConfig& c) {
  c.rope_theta = read_rope_theta(reader);
  c.dtype = reader.string("dtype", reader.string("torch_dtype", ""));
  if (c.model_type == kQwen3Moe) c.num_experts = read_expert_count(reader);
}

void check_positive(const std::string& source, const char* key, int64_t value) {
  VEOMNI_INPUT_CHECK(value > 0, "{}: key '{}': must be positive, got {}", source, key, value);
}

// The table's positivity checks and upper bounds (which refuse a corrupt or hostile config before anything is
// allocated), for the keys the model type has.
void check_table_keys(const ModelConfig& c, const std::string& source) {
  const ModelKeyTable& table = model_keys();
  const std::vector<ConfigValue> values = table.schema().values(c);
  for (size_t i = 0; i < table.rows().size(); ++i) {
    const KeyChecks& checks = table.rows()[i].checks;
    if (!table.applies(i, c.model_type) || !std::holds_alternative<int64_t>(values[i])) continue;
    const std::string& key = table.schema().fields()[i].key;
    const int64_t value = std::get<int64_t>(values[i]);
    if (checks.positive) check_positive(source, key.c_str(), value);
    VEOMNI_INPUT_CHECK(checks.max == 0 || value <= checks.max,
                       "{}: key '{}': {} is more than {}, the largest this toolkit accepts", source, key, value,
                       checks.max);
  }
  if (c.model_type == kQwen3Moe)
    VEOMNI_INPUT_CHECK(c.num_experts <= int64_t{1} << 14,
                       "{}: key 'num_local_experts': {} is more than {}, the largest this toolkit accepts", source,
                       c.num_experts, int64_t{1} << 14);
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

// Checks across keys of a qwen3_moe model (the table checked each key alone).
void validate_experts(const ModelConfig& c, const std::string& source) {
  VEOMNI_INPUT_CHECK(c.num_experts > 0, "{}: key 'num_local_experts': a qwen3_moe model needs at least one expert, got {}",
                     source, c.num_experts);
  VEOMNI_INPUT_CHECK(c.num_experts_per_tok <= c.num_experts,
                     "{}: key 'num_experts_per_tok': {} exceeds the number of experts ({})", source,
                     c.num_experts_per_tok, c.num_experts);
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
  check_table_keys(c, source);
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
  read_table_keys(object, source, c);
  read_derived_defaults(reader, c);
  read_special_keys(reader, c);
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
  const ModelKeyTable& table = model_keys();
  const std::vector<ConfigValue> values = table.schema().values(c);
  for (size_t i = 0; i < values.size(); ++i)
    if (table.applies(i, c.model_type)) out[table.schema().fields()[i].key] = config_value_json(values[i]);
  // Fixed values of the features this toolkit refuses other values of.
  out["hidden_act"] = "silu";
  out["rope_parameters"] = {{"rope_theta", c.rope_theta}, {"rope_type", "default"}};
  out["attention_dropout"] = 0.0;
  out["use_sliding_window"] = false;
  out["sliding_window"] = nullptr;
  if (!c.dtype.empty()) out["dtype"] = c.dtype;
  if (moe) {
    // 5.x saves num_local_experts; transformers 4.x only reads num_experts. Both keys load the same value in 5.x
    // (num_experts is mapped onto num_local_experts), so write both.
    out["num_local_experts"] = c.num_experts;
    out["num_experts"] = c.num_experts;
  } else {
    out["layer_types"] = std::vector<std::string>(static_cast<size_t>(c.num_hidden_layers), "full_attention");
    if (!out.contains("max_window_layers")) out["max_window_layers"] = 28;
  }
  return out;
}

std::vector<std::string> model_architecture_differences(const ModelConfig& a, const ModelConfig& b) {
  const json ja = model_config_to_json(a), jb = model_config_to_json(b);
  std::vector<std::string> keys = {"model_type", "rope_parameters", "num_local_experts"};
  const ModelKeyTable& table = model_keys();
  for (size_t i = 0; i < table.rows().size(); ++i)
    if (table.rows()[i].checks.architecture) keys.push_back(table.schema().fields()[i].key);
  std::vector<std::string> out;
  for (const std::string& key : keys) {
    const json va = ja.contains(key) ? ja.at(key) : json(nullptr);
    const json vb = jb.contains(key) ? jb.at(key) : json(nullptr);
    if (va != vb) out.push_back(fmt::format("{}: {} vs {}", key, va.dump(), vb.dump()));
  }
  return out;
}

void save_model_config(const ModelConfig& config, const std::string& path, ModelHead head) {
  write_json_file(path, model_config_to_json(config, head), 2);
}

}  // namespace veomni
