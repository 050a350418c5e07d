// Reading an adapter checkpoint's tensors in full, whatever layout saved it.
#include "ckpt/adapter_checkpoint.h"

#include <filesystem>

#include "ckpt/checkpoint_dir.h"
#include "ckpt/checkpoint_reader.h"

namespace veomni {

AdapterCheckpoint read_adapter_checkpoint(const std::string& checkpoint) {
  CheckpointReader reader(resolve_checkpoint_path(checkpoint));
  const CheckpointMetadata& m = reader.metadata();
  VEOMNI_INPUT_CHECK(m.adapter.has_value(),
                     "{}: a whole model's checkpoint, not an adapter (LoRA) one: its metadata has no key 'lora' "
                     "(hint: veomni-ckpt-merge converts it to a HuggingFace model)",
                     (std::filesystem::path(reader.dir()) / kCheckpointMetadataFile).string());
  AdapterCheckpoint out;
  out.dir = reader.dir();
  out.global_step = m.position.global_step;
  out.lora = m.adapter->lora;
  out.base = m.adapter->base;
  out.head = m.head;
  out.model_config = m.model_config;
  out.hf_config_json = m.hf_config_json;
  for (size_t i = 0; i < m.params.size(); ++i) out.tensors.emplace_back(m.params[i].name, reader.read_full(i, ShardField::Master));
  return out;
}

}  // namespace veomni
