// Checkpoint master weights into FSDP shards for a forward-only run (no optimizer state to restore).
#include "train/score_weights.h"

#include "ckpt/checkpoint_dir.h"
#include "ckpt/checkpoint_reader.h"
#include "ckpt/checkpoint_restore.h"
#include "core/error.h"
#include "parallel/shard_spec.h"

namespace veomni {

ModelConfig checkpoint_text_model(const std::string& checkpoint_dir, ModelHead head) {
  const std::string dir = resolve_checkpoint_path(checkpoint_dir);
  const CheckpointMetadata metadata = read_checkpoint_metadata(dir);
  VEOMNI_INPUT_CHECK(metadata.hf_config_json.empty(),
                     "{}/{}: key 'hf_config' holds a multimodal model; veomni-score reads text models (hint: merge "
                     "it with veomni-ckpt-merge and score the text model, or use veomni-train)",
                     dir, kCheckpointMetadataFile);
  VEOMNI_INPUT_CHECK(metadata.head == head,
                     "{}/{}: key 'model_head' is {}, so the checkpoint has no {} parameters for a {} head",
                     dir, kCheckpointMetadataFile, model_head_name(metadata.head),
                     head == ModelHead::LanguageModel ? "lm_head" : "score.weight", model_head_name(head));
  return metadata.model_config;
}

void load_checkpoint_masters(const std::string& checkpoint_dir, const ModelConfig& model, ModelHead head,
                             const DeviceMesh& mesh, Fsdp& fsdp) {
  const CheckpointReader reader(resolve_checkpoint_path(checkpoint_dir));
  reader.require_full_model("scoring with veomni-score");
  std::vector<ParamShardState> states;
  for (ParamShard& s : fsdp.shards())
    states.push_back({s.param->name, s.param->shape, s.param->is_expert, s.master, Tensor(), Tensor()});
  check_checkpoint_model(reader, model, head, states);
  for (size_t i = 0; i < states.size(); ++i) {
    const ShardSpec spec = shard_spec_for(states[i].shape, states[i].expert, mesh.shape, mesh.rank);
    const FlatRange range = full_tensor_range(spec, states[i].shape);
    Tensor host = Tensor::zeros({spec.shard_numel}, DType::F32);
    reader.read_range(i, ShardField::Master, range.begin, range.end, host.data<float>());
    states[i].master.copy_from(host);
  }
  fsdp.masters_updated();  // the compute copies the gathers send
}

}  // namespace veomni
