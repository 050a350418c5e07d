// Restoring shards from a checkpoint of any layout: model checks, then one range read per parameter and field.
#include "ckpt/checkpoint_restore.h"

#include <spdlog/fmt/ranges.h>

#include <filesystem>

#include "parallel/shard_spec.h"

namespace veomni {

namespace {

std::string metadata_path(const CheckpointReader& reader) {
  return (std::filesystem::path(reader.dir()) / kCheckpointMetadataFile).string();
}

std::string describe_param(const std::string& name, const Shape& shape, bool expert) {
  return fmt::format("{} {}{}", name, shape_str(shape), expert ? " (experts)" : "");
}

}  // namespace

void check_checkpoint_model(const CheckpointReader& reader, const ModelConfig& model, ModelHead head,
                            const std::vector<ParamShardState>& shards) {
  const ModelHead saved_head = reader.metadata().head;
  VEOMNI_INPUT_CHECK(saved_head == head,
                     "{}: the checkpoint's model head is {} (train.objective {}) but this run trains the {} head "
                     "(train.objective {}): resume with the checkpoint's objective, or start the new objective from "
                     "its merged model (veomni-ckpt-merge, then model.model_path)",
                     metadata_path(reader), model_head_name(saved_head), model_head_objectives(saved_head),
                     model_head_name(head), model_head_objectives(head));
  const std::vector<std::string> differences = model_architecture_differences(reader.metadata().model_config, model);
  VEOMNI_INPUT_CHECK(differences.empty(),
                     "{}: the checkpoint is of a different model ({}; checkpoint vs this run). A checkpoint can be "
                     "resumed under another parallel layout, not with another model config",
                     metadata_path(reader), fmt::join(differences, "; "));
  const std::vector<CheckpointParam>& saved = reader.metadata().params;
  VEOMNI_INPUT_CHECK(saved.size() == shards.size(), "{}: the checkpoint has {} parameters, the model {}",
                     metadata_path(reader), saved.size(), shards.size());
  for (size_t i = 0; i < shards.size(); ++i) {
    const CheckpointParam& p = saved[i];
    const ParamShardState& s = shards[i];
    VEOMNI_INPUT_CHECK(p.name == s.name && p.shape == s.shape && p.expert == s.expert,
                       "{}: parameter {} is {} in the checkpoint but {} in the model", metadata_path(reader), i,
                       describe_param(p.name, p.shape, p.expert), describe_param(s.name, s.shape, s.expert));
  }
}

void restore_param_shards(const CheckpointReader& reader, const MeshShape& mesh, int64_t rank,
                          std::vector<ParamShardState>& shards) {
  for (size_t i = 0; i < shards.size(); ++i) {
    ParamShardState& s = shards[i];
    const ShardSpec spec = shard_spec_for(s.shape, s.expert, mesh, rank);
    const FlatRange range = full_tensor_range(spec, s.shape);
    for (ShardField field : kShardFields) {
      Tensor& target = s.field(field);
      const bool storable = target.dtype() == DType::F32 || target.dtype() == DType::BF16;  // bf16: moments
      VEOMNI_CHECK(storable && target.numel() == spec.shard_numel,
                   "restoring '{}' {} into {} (spec: {} elements)", s.name, shard_field_name(field),
                   target.describe(), spec.shard_numel);
      Tensor host = Tensor::zeros({spec.shard_numel}, DType::F32);
      reader.read_range(i, field, range.begin, range.end, host.data<float>());
      // bf16 moments were saved widened: narrowing them back is exact.
      if (target.dtype() != DType::F32) host = host.to_dtype(target.dtype());
      target.copy_from(host);
    }
  }
}

}  // namespace veomni
