// The weights veomni-score reads: a HuggingFace directory (or the seeded HF initialisation, as veomni-train starts
// without model.model_path), or the master weights of a veomni checkpoint saved under any parallel layout.
#pragma once
#include <string>

#include "dist/device_mesh.h"
#include "model/model_config.h"
#include "parallel/fsdp.h"

namespace veomni {

// The text model of a checkpoint directory (or of what resolve_checkpoint_path accepts): InputError naming
// metadata.json for a multimodal checkpoint, which veomni-score does not read.
ModelConfig checkpoint_text_model(const std::string& checkpoint_dir);

// Overwrites this rank's FSDP shards with the checkpoint's master weights (its AdamW moments are not read), after
// checking that the checkpoint holds the same parameters: a head other than the checkpoint's is an InputError
// naming metadata.json and the parameter.
void load_checkpoint_masters(const std::string& checkpoint_dir, const ModelConfig& model, const DeviceMesh& mesh,
                             Fsdp& fsdp);

}  // namespace veomni
