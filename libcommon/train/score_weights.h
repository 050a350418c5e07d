// The weights veomni-score reads: a HuggingFace directory (or the seeded HF initialisation, as veomni-train starts
// without model.model_path), or the master weights of a veomni checkpoint saved under any parallel layout.
#pragma once
#include <string>

#include "dist/device_mesh.h"
#include "model/model_config.h"
#include "model/model_head.h"
#include "parallel/fsdp.h"

namespace veomni {

// The text model of a checkpoint directory (or of what resolve_checkpoint_path accepts): InputError naming
// metadata.json for a multimodal checkpoint, which veomni-score does not read, or for a checkpoint whose head is
// not `head` (the head the score needs).
ModelConfig checkpoint_text_model(const std::string& checkpoint_dir, ModelHead head);

// Overwrites this rank's FSDP shards with the checkpoint's master weights (its AdamW moments are not read), after
// checking that the checkpoint holds the same model with the same head: another head is an InputError naming both.
void load_checkpoint_masters(const std::string& checkpoint_dir, const ModelConfig& model, ModelHead head,
                             const DeviceMesh& mesh, Fsdp& fsdp);

}  // namespace veomni
