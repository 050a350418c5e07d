// metadata.json of a checkpoint: JSON form, validation on read (naming file and key), model-config comparison.
#include "ckpt/checkpoint_metadata.h"

#include <spdlog/fmt/ranges.h>

#include <filesystem>

#include "ckpt/file_checksum.h"
#include "io/json_file.h"
#include "parallel/shard_spec.h"

namespace veomni {

namespace {

using json = nlohmann::json;

// Typed access to an object's members with errors "<source>: key 'a.b': ...".
class JsonFields {
 public:
  JsonFields(const json& object, std::string source, std::string prefix = "")
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {
    VEOMNI_INPUT_CHECK(object_.is_object(), "{}: {} must be an object, found {}", source_,
                       prefix_.empty() ? std::string("the file") : fmt::format("key '{}'", prefix_),
                       object_.type_name());
  }

  std::string key(const char* name) const { return prefix_.empty() ? name : prefix_ + "." + name; }
  bool has(const char* name) const { return object_.contains(name) && !object_.at(name).is_null(); }
  const json& at(const char* name) const {
    VEOMNI_INPUT_CHECK(object_.contains(name), "{}: missing key '{}'", source_, key(name));
    return object_.at(name);
  }
  JsonFields object(const char* name) const { return JsonFields(at(name), source_, key(name)); }
  int64_t integer(const char* name, int64_t min_value = 0) const {
    const json& v = at(name);
    VEOMNI_INPUT_CHECK(v.is_number_integer(), "{}: key '{}' must be an integer, found {}", source_, key(name),
                       v.dump());
    const int64_t value = v.get<int64_t>();
    VEOMNI_INPUT_CHECK(value >= min_value, "{}: key '{}' is {}, must be >= {}", source_, key(name), value, min_value);
    return value;
  }
  double number(const char* name) const {
    const json& v = at(name);
    VEOMNI_INPUT_CHECK(v.is_number(), "{}: key '{}' must be a number, found {}", source_, key(name), v.dump());
    return v.get<double>();
  }
  bool boolean(const char* name) const {
    const json& v = at(name);
    VEOMNI_INPUT_CHECK(v.is_boolean(), "{}: key '{}' must be true or false, found {}", source_, key(name), v.dump());
    return v.get<bool>();
  }
  std::string string(const char* name) const {
    const json& v = at(name);
    VEOMNI_INPUT_CHECK(v.is_string(), "{}: key '{}' must be a string, found {}", source_, key(name), v.dump());
    return v.get<std::string>();
  }
  const json& array(const char* name) const {
    const json& v = at(name);
    VEOMNI_INPUT_CHECK(v.is_array(), "{}: key '{}' must be an array, found {}", source_, key(name), v.type_name());
    return v;
  }
  const std::string& source() const { return source_; }

 private:
  const json& object_;
  std::string source_;
  std::string prefix_;
};

const char* shard_kind(bool expert) { return expert ? "ep+fsdp" : "fsdp"; }

nlohmann::ordered_json position_to_json(const TrainingPosition& p) {
  return {{"global_step", p.global_step},       {"optimizer_steps", p.optimizer_steps},
          {"epoch", p.epoch},                   {"step_in_epoch", p.step_in_epoch},
          {"seed", p.seed},                     {"lr_total_steps", p.lr_total_steps},
          {"last_lr", p.last_lr}};
}

TrainingPosition position_from_json(const JsonFields& f) {
  TrainingPosition p;
  p.global_step = f.integer("global_step");
  p.optimizer_steps = f.integer("optimizer_steps");
  p.epoch = f.integer("epoch");
  p.step_in_epoch = f.integer("step_in_epoch");
  p.seed = f.integer("seed", INT64_MIN);
  p.lr_total_steps = f.integer("lr_total_steps");
  p.last_lr = f.number("last_lr");
  return p;
}

nlohmann::ordered_json data_plan_to_json(const DataPlanInfo& d) {
  nlohmann::ordered_json out = {{"train_path", d.train_path},       {"num_samples", d.num_samples},
                                {"micro_batches_per_step", d.micro_batches_per_step}, {"token_budget", d.token_budget},
                                {"max_seq_len", d.max_seq_len},     {"shuffle", d.shuffle}};
  if (d.sources.empty()) return out;  // versions 1 to 3 have no key 'sources'
  out["sources"] = nlohmann::ordered_json::array();
  for (const DataPlanSource& s : d.sources)
    out["sources"].push_back({{"path", s.path}, {"name", s.name}, {"weight", s.weight}, {"num_samples", s.num_samples}});
  return out;
}

// Key 'sources' (a mixed run's datasets) from format version 4 on.
std::vector<DataPlanSource> data_plan_sources_from_json(const JsonFields& f, int64_t version) {
  std::vector<DataPlanSource> sources;
  if (!f.has("sources")) return sources;
  VEOMNI_INPUT_CHECK(version >= 4, "{}: key 'data_plan.sources' needs format_version 4, the file says {}", f.source(),
                     version);
  const nlohmann::json& list = f.array("sources");
  for (size_t i = 0; i < list.size(); ++i) {
    const JsonFields s(list[i], f.source(), fmt::format("data_plan.sources[{}]", i));
    sources.push_back({s.string("path"), s.string("name"), s.number("weight"), s.integer("num_samples")});
  }
  return sources;
}

DataPlanInfo data_plan_from_json(const JsonFields& f, int64_t version) {
  DataPlanInfo d;
  d.sources = data_plan_sources_from_json(f, version);
  d.train_path = f.string("train_path");
  d.num_samples = f.integer("num_samples");
  d.micro_batches_per_step = f.integer("micro_batches_per_step", 1);
  d.token_budget = f.integer("token_budget", 1);
  d.max_seq_len = f.integer("max_seq_len", 1);
  d.shuffle = f.boolean("shuffle");
  return d;
}

nlohmann::ordered_json param_to_json(const CheckpointParam& p, const MeshShape& mesh) {
  const ShardSpec spec = shard_spec_for(p.shape, p.expert, mesh, 0);
  nlohmann::ordered_json shard = {{"kind", shard_kind(p.expert)}};
  if (p.expert) shard["ep"] = mesh.ep;
  shard["group_size"] = spec.group_size;
  shard["local_numel"] = spec.local_numel;
  shard["shard_numel"] = p.shard_numel;
  return {{"name", p.name}, {"shape", p.shape}, {"dtype", "f32"}, {"shard", shard}};
}

Shape shape_from_json(const JsonFields& f, const char* name) {
  Shape shape;
  for (const json& d : f.array(name)) {
    VEOMNI_INPUT_CHECK(d.is_number_integer() && d.get<int64_t>() > 0,
                       "{}: key '{}' must list positive integers, found {}", f.source(), f.key(name), d.dump());
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

CheckpointParam param_from_json(const JsonFields& f, const MeshShape& mesh) {
  CheckpointParam p;
  p.name = f.string("name");
  p.shape = shape_from_json(f, "shape");
  VEOMNI_INPUT_CHECK(f.string("dtype") == "f32", "{}: parameter '{}' has dtype '{}'; masters are always f32",
                     f.source(), p.name, f.string("dtype"));
  const JsonFields shard = f.object("shard");
  const std::string kind = shard.string("kind");
  VEOMNI_INPUT_CHECK(kind == "fsdp" || kind == "ep+fsdp", "{}: parameter '{}' has shard kind '{}' (fsdp or ep+fsdp)",
                     f.source(), p.name, kind);
  p.expert = kind == "ep+fsdp";
  VEOMNI_INPUT_CHECK(!p.expert || (!p.shape.empty() && p.shape[0] % mesh.ep == 0),
                     "{}: expert parameter '{}' of shape {} cannot be split over ep {}", f.source(), p.name,
                     shape_str(p.shape), mesh.ep);
  p.shard_numel = shard.integer("shard_numel", 1);
  const ShardSpec spec = shard_spec_for(p.shape, p.expert, mesh, 0);
  VEOMNI_INPUT_CHECK(spec.shard_numel == p.shard_numel && spec.group_size == shard.integer("group_size", 1) &&
                         spec.local_numel == shard.integer("local_numel", 1),
                     "{}: parameter '{}' has shard {} but a {} shard of shape {} over {} has group_size {}, "
                     "local_numel {}, shard_numel {} (written by an incompatible version?)",
                     f.source(), p.name, f.at("shard").dump(), kind, shape_str(p.shape), mesh.describe(),
                     spec.group_size, spec.local_numel, spec.shard_numel);
  return p;
}

MeshShape mesh_from_json(const JsonFields& f) {
  MeshShape mesh;
  mesh.world = f.integer("world", 1);
  mesh.ulysses = f.integer("ulysses", 1);
  mesh.ep = f.integer("ep", 1);
  VEOMNI_INPUT_CHECK(mesh.world % mesh.ulysses == 0 && mesh.world % mesh.ep == 0,
                     "{}: mesh world {} is not divisible by ulysses {} and ep {}", f.source(), mesh.world,
                     mesh.ulysses, mesh.ep);
  return mesh;
}

std::vector<RankFileInfo> rank_files_from_json(const JsonFields& f, const MeshShape& mesh) {
  const json& files = f.array("rank_files");
  VEOMNI_INPUT_CHECK(static_cast<int64_t>(files.size()) == mesh.world,
                     "{}: key 'rank_files' lists {} files for a world of {} ranks", f.source(), files.size(),
                     mesh.world);
  std::vector<RankFileInfo> out;
  for (size_t r = 0; r < files.size(); ++r) {
    const JsonFields entry(files[r], f.source(), fmt::format("rank_files[{}]", r));
    const std::optional<uint64_t> checksum = parse_checksum(entry.string("checksum"));
    VEOMNI_INPUT_CHECK(checksum.has_value(),
                       "{}: rank_files[{}].checksum '{}' is not of the form fnv1a64w:<16 hex digits>", f.source(), r,
                       entry.string("checksum"));
    RankFileInfo info{entry.string("file"), static_cast<uint64_t>(entry.integer("bytes", 1)), *checksum};
    const std::string expected = rank_file_name(static_cast<int64_t>(r), mesh.world);
    VEOMNI_INPUT_CHECK(info.file == expected, "{}: rank_files[{}] is '{}', expected '{}'", f.source(), r, info.file,
                       expected);
    out.push_back(std::move(info));
  }
  return out;
}

// Version 1 predates the key: its checkpoints are all of the LM head.
ModelHead head_from_json(const JsonFields& f, int64_t version) {
  if (version < 2) {
    VEOMNI_INPUT_CHECK(!f.has("model_head"), "{}: key 'model_head' needs format_version 2, the file says {}",
                       f.source(), version);
    return ModelHead::LanguageModel;
  }
  const std::string name = f.string("model_head");
  try {
    return model_head_from_name(name);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: key 'model_head': {}", f.source(), e.what()));
  }
}

nlohmann::ordered_json lora_to_json(const LoraConfig& l) {
  return {{"rank", l.rank},
          {"alpha", l.alpha},
          {"use_rslora", l.use_rslora},
          {"lora_modules", l.lora_modules},
          {"exclude_modules", l.exclude_modules},
          {"share_expert_lora", l.share_expert_lora}};
}

LoraConfig lora_from_json(const JsonFields& f) {
  LoraConfig l;
  l.rank = f.integer("rank", 1);
  l.alpha = f.number("alpha");
  l.use_rslora = f.boolean("use_rslora");
  l.lora_modules.clear();
  for (const json& m : f.array("lora_modules")) {
    VEOMNI_INPUT_CHECK(m.is_string(), "{}: key '{}' must list strings, found {}", f.source(), f.key("lora_modules"),
                       m.dump());
    l.lora_modules.push_back(m.get<std::string>());
  }
  l.exclude_modules = f.string("exclude_modules");
  l.share_expert_lora = f.boolean("share_expert_lora");
  try {
    l.validate("lora");
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", f.source(), e.what()));
  }
  return l;
}

nlohmann::ordered_json base_to_json(const BaseModelIdentity& b) {
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const BaseWeightFile& w : b.weight_files)
    files.push_back({{"file", w.file}, {"checksum", format_checksum(w.checksum)}});
  return {{"model_path", b.model_path},
          {"weight_files", files},
          {"seed", b.random_init() ? nlohmann::ordered_json(b.seed) : nlohmann::ordered_json(nullptr)}};
}

BaseModelIdentity base_from_json(const JsonFields& f) {
  BaseModelIdentity b;
  b.model_path = f.string("model_path");
  const json& files = f.array("weight_files");
  for (size_t i = 0; i < files.size(); ++i) {
    const JsonFields entry(files[i], f.source(), fmt::format("{}[{}]", f.key("weight_files"), i));
    const std::optional<uint64_t> checksum = parse_checksum(entry.string("checksum"));
    VEOMNI_INPUT_CHECK(checksum.has_value(), "{}: key '{}' is '{}', not of the form fnv1a64w:<16 hex digits>",
                       f.source(), entry.key("checksum"), entry.string("checksum"));
    b.weight_files.push_back({entry.string("file"), *checksum});
  }
  if (b.random_init()) {
    VEOMNI_INPUT_CHECK(files.empty(), "{}: key '{}' lists weight files but model_path is empty (a random init)",
                       f.source(), f.key("weight_files"));
    b.seed = f.integer("seed", INT64_MIN);
  } else {
    VEOMNI_INPUT_CHECK(!files.empty(), "{}: key '{}' is empty: the base model's weight files are not identified",
                       f.source(), f.key("weight_files"));
  }
  return b;
}

// Keys 'lora' and 'base_model' come together, from format version 3 on.
std::optional<AdapterCheckpointInfo> adapter_from_json(const JsonFields& f, int64_t version) {
  if (!f.has("lora") && !f.has("base_model")) return std::nullopt;
  VEOMNI_INPUT_CHECK(version >= 3, "{}: keys 'lora' and 'base_model' need format_version 3, the file says {}",
                     f.source(), version);
  return AdapterCheckpointInfo{lora_from_json(f.object("lora")), base_from_json(f.object("base_model"))};
}

// Key 'optimizer' from format version 5 on; absent: adamw's float32 moments.
std::string optimizer_from_json(const JsonFields& f, int64_t version) {
  if (!f.has("optimizer")) return "adamw";
  VEOMNI_INPUT_CHECK(version >= 5, "{}: key 'optimizer' needs format_version 5, the file says {}", f.source(),
                     version);
  const JsonFields o = f.object("optimizer");
  const std::string type = o.string("type");
  const std::string moments = o.string("moment_dtype");
  VEOMNI_INPUT_CHECK((type == "anyprecision_adamw" && moments == "bf16") || (type == "adamw" && moments == "f32"),
                     "{}: key 'optimizer' says type \"{}\" with moment_dtype \"{}\" (anyprecision_adamw with bf16, or "
                     "adamw with f32)", f.source(), type, moments);
  return type;
}

}  // namespace

std::string rank_file_name(int64_t rank, int64_t world) { return fmt::format("rank-{:05d}-of-{:05d}.h5", rank, world); }

CheckpointParam checkpoint_param(const std::string& name, const Shape& shape, bool expert, const MeshShape& mesh) {
  return {name, shape, expert, shard_spec_for(shape, expert, mesh, 0).shard_numel};
}

nlohmann::ordered_json checkpoint_metadata_to_json(const CheckpointMetadata& m) {
  nlohmann::ordered_json out;
  out["format"] = kCheckpointFormat;
  const bool mixed = m.data_plan && !m.data_plan->sources.empty();
  const bool bf16_moments = m.optimizer_type != "adamw";
  out["format_version"] = bf16_moments ? 5 : mixed ? 4 : m.adapter ? 3 : m.head == ModelHead::LanguageModel ? 1 : 2;
  out["producer"] = m.producer;
  out["global_step"] = m.position.global_step;
  out["mesh"] = {{"world", m.mesh.world}, {"ulysses", m.mesh.ulysses}, {"ep", m.mesh.ep}, {"dp", m.mesh.dp()}};
  out["position"] = position_to_json(m.position);
  out["data_plan"] = m.data_plan ? data_plan_to_json(*m.data_plan) : nlohmann::ordered_json(nullptr);
  if (m.head != ModelHead::LanguageModel || m.adapter || mixed || bf16_moments)
    out["model_head"] = model_head_name(m.head);  // >= 2
  out["model_config"] = nlohmann::ordered_json::parse(model_config_to_json(m.model_config, m.head).dump());
  if (!m.hf_config_json.empty()) out["hf_config"] = nlohmann::ordered_json::parse(m.hf_config_json);
  out["train_config"] =
      m.train_config_yaml.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(m.train_config_yaml);
  out["tokenizer_path"] = m.tokenizer_path;
  if (m.adapter) {
    out["lora"] = lora_to_json(m.adapter->lora);
    out["base_model"] = base_to_json(m.adapter->base);
  }
  if (bf16_moments) out["optimizer"] = {{"type", m.optimizer_type}, {"moment_dtype", "bf16"}};
  out["metrics_log"] = m.has_metrics ? nlohmann::ordered_json(kCheckpointMetricsFile) : nlohmann::ordered_json(nullptr);
  out["parameters"] = nlohmann::ordered_json::array();
  for (const CheckpointParam& p : m.params) out["parameters"].push_back(param_to_json(p, m.mesh));
  out["rank_files"] = nlohmann::ordered_json::array();
  for (const RankFileInfo& f : m.rank_files)
    out["rank_files"].push_back({{"file", f.file}, {"bytes", f.bytes}, {"checksum", format_checksum(f.checksum)}});
  return out;
}

CheckpointMetadata checkpoint_metadata_from_json(const json& root, const std::string& source) {
  const JsonFields f(root, source);
  VEOMNI_INPUT_CHECK(f.has("format") && f.string("format") == kCheckpointFormat,
                     "{}: not a veomni checkpoint (key 'format' is not \"{}\")", source, kCheckpointFormat);
  const int64_t version = f.integer("format_version");
  VEOMNI_INPUT_CHECK(version >= 1 && version <= kCheckpointFormatVersion,
                     "{}: checkpoint format version {} is not supported (this build reads versions 1 to {})", source,
                     version, kCheckpointFormatVersion);
  CheckpointMetadata m;
  m.producer = f.string("producer");
  m.mesh = mesh_from_json(f.object("mesh"));
  m.position = position_from_json(f.object("position"));
  VEOMNI_INPUT_CHECK(f.integer("global_step") == m.position.global_step,
                     "{}: global_step {} differs from position.global_step {}", source, f.integer("global_step"),
                     m.position.global_step);
  if (f.has("data_plan")) m.data_plan = data_plan_from_json(f.object("data_plan"), version);
  m.head = head_from_json(f, version);
  f.object("model_config");  // an object, or an error naming the key
  m.model_config = model_config_from_json(f.at("model_config"), source + " (model_config)");
  if (f.has("hf_config")) {
    f.object("hf_config");  // an object, or an error naming the key
    m.hf_config_json = f.at("hf_config").dump();
  }
  if (f.has("train_config")) m.train_config_yaml = f.string("train_config");
  m.tokenizer_path = f.string("tokenizer_path");
  m.adapter = adapter_from_json(f, version);
  m.optimizer_type = optimizer_from_json(f, version);
  if (f.has("metrics_log")) {
    VEOMNI_INPUT_CHECK(f.string("metrics_log") == kCheckpointMetricsFile, "{}: key 'metrics_log' must be \"{}\"",
                       source, kCheckpointMetricsFile);
    m.has_metrics = true;
  }
  const json& params = f.array("parameters");
  VEOMNI_INPUT_CHECK(!params.empty(), "{}: key 'parameters' is empty", source);
  for (size_t i = 0; i < params.size(); ++i)
    m.params.push_back(param_from_json(JsonFields(params[i], source, fmt::format("parameters[{}]", i)), m.mesh));
  m.rank_files = rank_files_from_json(f, m.mesh);
  return m;
}

void write_checkpoint_metadata(const CheckpointMetadata& metadata, const std::string& dir) {
  write_json_file((std::filesystem::path(dir) / kCheckpointMetadataFile).string(),
                  checkpoint_metadata_to_json(metadata));
}

CheckpointMetadata read_checkpoint_metadata(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kCheckpointMetadataFile).string();
  std::error_code ec;
  VEOMNI_INPUT_CHECK(std::filesystem::exists(path, ec),
                     "{}: not a checkpoint directory (no {}; an interrupted save leaves only a .tmp- directory)", dir,
                     kCheckpointMetadataFile);
  return checkpoint_metadata_from_json(read_json_file(path), path);
}

}  // namespace veomni
