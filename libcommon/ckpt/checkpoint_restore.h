// Resuming: fills this rank's parameter shards (masters and AdamW moments) from a checkpoint saved under any
// parallel layout, after checking that the checkpoint is of the same model.
#pragma once
#include <cstdint>
#include <vector>

#include "ckpt/checkpoint_reader.h"
#include "ckpt/shard_state.h"
#include "model/model_config.h"

namespace veomni {

// InputError naming metadata.json when the checkpoint's model differs in architecture from `model`, in its head
// from `head` (naming both and their objectives), or its parameters (names, shapes, expert split) from `shards`:
// a checkpoint can be resharded, not converted.
void check_checkpoint_model(const CheckpointReader& reader, const ModelConfig& model, ModelHead head,
                            const std::vector<ParamShardState>& shards);

// For each shard, reads the elements of the full tensor that rank `rank` of `mesh` holds (shard_spec_for), zero
// padding the rest; the shards' tensors are written in place (FSDP's aliased views see the new values).
void restore_param_shards(const CheckpointReader& reader, const MeshShape& mesh, int64_t rank,
                          std::vector<ParamShardState>& shards);

}  // namespace veomni
