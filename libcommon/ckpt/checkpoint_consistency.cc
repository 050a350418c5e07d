// The model a checkpoint's config implies (built without materialising a value) compared with its parameter list,
// and that list compared with each rank file's datasets.
#include "ckpt/checkpoint_consistency.h"

#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "model/parallel_hooks.h"
#include "model/thinker/thinker_config.h"
#include "train/train_model.h"

namespace veomni {

namespace {

struct ImpliedParam {
  Shape shape;
  bool expert = false;
};

// Name -> shape of every parameter of the model (body and head) the metadata describes, in no allocation.
std::map<std::string, ImpliedParam> implied_params(const CheckpointMetadata& m, const std::string& file) {
  ParamHooks no_materialisation;
  ModelOptions options;
  options.hooks.params = &no_materialisation;
  std::unique_ptr<TrainModel> model;
  if (m.hf_config_json.empty())
    model = std::make_unique<TrainModel>(m.model_config, options, m.head);
  else
    model = std::make_unique<TrainModel>(
        thinker_config_from_json(nlohmann::json::parse(m.hf_config_json), file + " (hf_config)"), options, false,
        m.head);
  std::map<std::string, ImpliedParam> out;
  for (const auto& p : model->params().all()) out[p->name] = {p->shape, p->is_expert};
  return out;
}

}  // namespace

void check_params_match_model_config(const CheckpointReader& reader) {
  reader.require_full_model("a check against the whole model's parameters");
  const CheckpointMetadata& m = reader.metadata();
  const std::string file = (std::filesystem::path(reader.dir()) / kCheckpointMetadataFile).string();
  const char* config_key = m.hf_config_json.empty() ? "model_config" : "hf_config";
  const std::map<std::string, ImpliedParam> implied = implied_params(m, file);
  std::set<std::string> listed;
  for (size_t i = 0; i < m.params.size(); ++i) {
    const CheckpointParam& p = m.params[i];
    const auto it = implied.find(p.name);
    VEOMNI_INPUT_CHECK(it != implied.end(),
                       "{}: key 'parameters[{}]' is '{}', which the model of key '{}' does not have (an edited "
                       "config or parameter list?)",
                       file, i, p.name, config_key);
    VEOMNI_INPUT_CHECK(it->second.shape == p.shape && it->second.expert == p.expert,
                       "{}: key 'parameters[{}]' ('{}') has shape {}{} but the model of key '{}' implies {}{}", file,
                       i, p.name, shape_str(p.shape), p.expert ? " (experts)" : "", config_key,
                       shape_str(it->second.shape), it->second.expert ? " (experts)" : "");
    VEOMNI_INPUT_CHECK(listed.insert(p.name).second, "{}: key 'parameters[{}]' lists '{}' a second time", file, i,
                       p.name);
  }
  for (const auto& [name, param] : implied)
    VEOMNI_INPUT_CHECK(listed.count(name) != 0,
                       "{}: key 'parameters' lacks '{}' {}, which the model of key '{}' implies (a dropped entry, or "
                       "an edited config?)",
                       file, name, shape_str(param.shape), config_key);
}

void check_rank_files_match_params(CheckpointReader& reader) {
  const CheckpointMetadata& m = reader.metadata();
  std::set<std::string> listed;
  for (const CheckpointParam& p : m.params) listed.insert(p.name);
  for (int64_t r = 0; r < m.mesh.world; ++r) {
    const RankShardReader& rank = reader.rank_file(r);
    for (ShardField field : kShardFields) {
      const std::vector<std::string> held = rank.names(field);
      const std::set<std::string> held_set(held.begin(), held.end());
      for (const std::string& name : held)
        VEOMNI_INPUT_CHECK(listed.count(name) != 0,
                           "{}: holds '{}/{}', which metadata.json's key 'parameters' does not list (a dropped "
                           "entry?)",
                           rank.path(), shard_field_name(field), name);
      for (const std::string& name : listed)
        VEOMNI_INPUT_CHECK(held_set.count(name) != 0, "{}: lacks '{}/{}', which metadata.json's key 'parameters' lists",
                           rank.path(), shard_field_name(field), name);
    }
    reader.close_files();
  }
}

}  // namespace veomni
