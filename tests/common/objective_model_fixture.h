// Loads a whole-model objective fixture (tests/fixtures/objective_models/<case>, made by
// scripts/gen_objective_model_fixtures.py): its samples packed by the real collator, the objective settings, the head
// and the HF model directory; shared by the CPU and GPU objective fixture tests.
#pragma once
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/collator.h"
#include "data/dataset_objective_keys.h"
#include "data/multimodal_collator.h"
#include "data/sample.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/lora_config.h"
#include "model/model_config.h"
#include "model/thinker/multimodal_batch.h"
#include "model/thinker/thinker_config.h"
#include "objective/objective_config.h"
#include "train/objective.h"
#include "train/train_model.h"

namespace veomni::testing {

struct ObjectiveModelFixture {
  std::string name;
  std::string dir;        // the case's directory
  std::string model_dir;  // the HF model the policy (and the DPO reference) load
  nlohmann::json expected;
  MultimodalBatch batch;
  ModelConfig config;
  ModelHead head = ModelHead::LanguageModel;
  ObjectiveSettings settings;
  bool model_reference = false;  // DPO against a frozen copy of the start weights (not dataset log-probs)
  // "multimodal": true: a Qwen3-VL model (model_dir holds config.json and weights.safetensors under our names) whose
  // samples (batch.safetensors) the multimodal collator packs; config is then its text model.
  bool multimodal = false;
  ThinkerConfig thinker;
  // expected.json "lora" (the LoRA cases): adapters on the frozen model, their start values in adapters.safetensors.
  LoraConfig lora;
};

// expected.json's "lora": model.lora_config of a LoRA case; rank 0 (LoRA off) when null or absent.
inline LoraConfig lora_of(const nlohmann::json& expected) {
  LoraConfig lora;
  if (!expected.contains("lora") || expected["lora"].is_null()) return lora;
  const nlohmann::json& c = expected["lora"];
  lora.rank = c.at("rank").get<int64_t>();
  lora.alpha = c.at("alpha").get<double>();
  lora.use_rslora = c.at("use_rslora").get<bool>();
  lora.lora_modules = c.at("lora_modules").get<std::vector<std::string>>();
  lora.exclude_modules = c.at("exclude_modules").get<std::string>();
  lora.share_expert_lora = c.at("share_expert_lora").get<bool>();
  return lora;
}

// One stored sample as the dataset reader hands it over: every key a tensor of the stored dtype.
inline Sample sample_from_json(const nlohmann::json& s) {
  Sample out;
  const auto ids = s.at("input_ids").get<std::vector<int64_t>>();
  const auto n = static_cast<int64_t>(ids.size());
  out["input_ids"] = Tensor::from_vector(ids, {n});
  out["labels"] = Tensor::from_vector(s.at("labels").get<std::vector<int64_t>>(), {n});
  if (s.contains("position_ids"))
    out["position_ids"] = Tensor::from_vector(s["position_ids"].get<std::vector<int64_t>>(), {n});
  if (s.contains(kChosenLengthKey))
    out[kChosenLengthKey] = Tensor::from_vector(std::vector<int64_t>{s[kChosenLengthKey].get<int64_t>()}, {1});
  for (const char* key : kRolloutKeys)
    if (s.contains(key)) out[key] = Tensor::from_vector(s[key].get<std::vector<float>>(), {n});
  for (const char* key : {kRefChosenLogpsKey, kRefRejectedLogpsKey})
    if (s.contains(key)) out[key] = Tensor::from_vector(std::vector<float>{s[key].get<float>()}, {1});
  return out;
}

// expected.json's config: {"dpo_config": {...}} | {"actor": {...}} | {"critic": {...}} | {} (reward).
inline ObjectiveSettings settings_of(const nlohmann::json& expected) {
  ObjectiveSettings s;
  s.name = expected.at("objective").get<std::string>();
  const nlohmann::json& config = expected.at("config");
  if (config.contains("dpo_config")) {
    const nlohmann::json& c = config["dpo_config"];
    s.dpo.beta = c.at("beta").get<double>();
    s.dpo.label_smoothing = c.at("label_smoothing").get<double>();
    s.dpo.loss_type = c.at("loss_type").get<std::string>();
    s.dpo.reference_free = c.at("reference_free").get<bool>();
    s.dpo.refer_model_precision = c.at("refer_model_precision").get<std::string>();
  }
  if (config.contains("actor")) {
    const nlohmann::json& c = config["actor"];
    s.actor.clip_ratio = c.at("clip_ratio").get<double>();
    s.actor.clip_ratio_c = c.at("clip_ratio_c").get<double>();
    s.actor.entropy_coeff = c.at("entropy_coeff").get<double>();
    s.actor.use_kl_loss = c.at("use_kl_loss").get<bool>();
    s.actor.kl_loss_coef = c.at("kl_loss_coef").get<double>();
    s.actor.kl_loss_type = c.at("kl_loss_type").get<std::string>();
    s.actor.loss_agg_mode = c.at("loss_agg_mode").get<std::string>();
  }
  if (config.contains("critic")) {
    const nlohmann::json& c = config["critic"];
    s.critic.cliprange_value = c.at("cliprange_value").get<double>();
    s.critic.loss_agg_mode = c.at("loss_agg_mode").get<std::string>();
  }
  return s;
}

inline const char* role_name(SequenceRole role) {
  switch (role) {
    case SequenceRole::Chosen: return "chosen";
    case SequenceRole::Rejected: return "rejected";
    case SequenceRole::Plain: break;
  }
  return "plain";
}

inline std::vector<int64_t> int_values(const Tensor& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

// Where the collator's batch differs from the row the generator packed (expected.json packed_row), or "" when it is
// the same row: otherwise the numbers compared below would belong to different rows.
inline std::string packed_row_difference(const ObjectiveModelFixture& f) {
  const nlohmann::json& row = f.expected.at("packed_row");
  const Batch& b = f.batch.text;
  if (int_values(b.input_ids) != row.at("input_ids").get<std::vector<int64_t>>()) return "input_ids";
  if (int_values(b.position_ids) != row.at("position_ids").get<std::vector<int64_t>>()) return "position_ids";
  if (int_values(b.target_ids) != row.at("target_ids").get<std::vector<int64_t>>()) return "target_ids";
  if (b.cu_seqlens != row.at("cu_seqlens").get<std::vector<int32_t>>()) return "cu_seqlens";
  std::vector<std::string> roles;
  for (SequenceRole role : b.sequence_roles) roles.push_back(role_name(role));
  if (roles != row.at("sequence_roles").get<std::vector<std::string>>()) return "sequence_roles";
  const nlohmann::json& values = row.at("token_values");
  if (b.token_values.size() != values.size()) return "token_values keys";
  for (const auto& [key, tensor] : b.token_values) {
    if (!values.contains(key)) return "token_values key " + key;
    if (tensor.to_float_vector() != values[key].get<std::vector<float>>()) return "token_values " + key;
  }
  const auto ref = b.sequence_values.find("ref_logps");
  if (row.contains("ref_logps") != (ref != b.sequence_values.end())) return "presence of ref_logps";
  if (row.contains("ref_logps") && ref->second != row["ref_logps"].get<std::vector<float>>()) return "ref_logps";
  return "";
}

// batch.safetensors of a multimodal case: sample k's keys stored as "<k>.<key>".
inline std::vector<Sample> multimodal_samples_from(const std::string& path) {
  SafetensorsReader reader(path);
  std::vector<Sample> samples;
  for (const auto& entry : reader.entries()) {
    const size_t dot = entry.name.find('.');
    const auto k = static_cast<size_t>(std::stoul(entry.name.substr(0, dot)));
    if (samples.size() <= k) samples.resize(k + 1);
    samples[k][entry.name.substr(dot + 1)] = reader.read(entry.name);
  }
  return samples;
}

// The multimodal collator's batch of a thinker case (one process, no SP).
inline MultimodalBatch multimodal_fixture_batch(const ObjectiveModelFixture& f) {
  const std::vector<Sample> samples = multimodal_samples_from(f.dir + "/batch.safetensors");
  std::vector<NamedSample> named;
  for (size_t k = 0; k < samples.size(); ++k) named.push_back({&samples[k], f.name + " sample " + std::to_string(k)});
  MultimodalCollateOptions options;
  options.max_seq_len = 4096;
  options.merge_unit = f.thinker.vision.merge_unit();
  options.has_audio = f.thinker.has_audio;
  options.position_dtype = f.thinker.has_audio ? DType::F32 : DType::I64;
  options.vocab_size = f.config.vocab_size;
  return collate_multimodal(named, options);
}

// A missing fixture throws (the test fails: the fixtures are generated, never optional).
inline ObjectiveModelFixture load_objective_model_fixture(const std::string& name) {
  ObjectiveModelFixture f;
  f.name = name;
  const std::string root = VEOMNI_FIXTURES_DIR;
  f.dir = root + "/objective_models/" + name;
  if (!std::filesystem::is_regular_file(f.dir + "/expected.json"))
    throw std::runtime_error(f.dir + "/expected.json is missing (hint: run python3 "
                             "scripts/gen_objective_model_fixtures.py where torch and transformers are installed)");
  f.expected = read_json_file(f.dir + "/expected.json");
  f.model_dir = root + "/" + f.expected.at("model_dir").get<std::string>();
  f.multimodal = f.expected.at("multimodal").get<bool>();
  f.head = model_head_from_name(f.expected.at("head").get<std::string>());
  f.settings = settings_of(f.expected);
  f.lora = lora_of(f.expected);
  f.model_reference = f.expected.value("reference", nlohmann::json()) == "model";
  if (f.multimodal) {
    f.thinker = load_thinker_config(f.model_dir);
    f.config = f.thinker.text;
    f.batch = multimodal_fixture_batch(f);
    return f;
  }
  f.config = load_model_config(f.model_dir);

  const nlohmann::json batch = read_json_file(f.dir + "/batch.json");
  std::vector<TokenSample> samples;
  for (size_t i = 0; i < batch.at("samples").size(); ++i)
    samples.push_back(token_sample_from(sample_from_json(batch["samples"][i]), name + " sample " + std::to_string(i)));
  CollateOptions options;
  options.max_seq_len = 4096;
  options.vocab_size = f.config.vocab_size;
  f.batch.text = slice_for_sp_rank(pack_samples(samples, options), 1, 0);
  return f;
}

}  // namespace veomni::testing
