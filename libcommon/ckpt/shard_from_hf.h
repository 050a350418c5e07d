// veomni-ckpt-shard's work: a HuggingFace model directory as a step-0 checkpoint for a parallel layout (fp32
// masters sharded as shard_spec_for defines, zero AdamW moments), which veomni-train resumes from.
#pragma once
#include <cstdint>
#include <string>

#include "dist/device_mesh.h"
#include "model/model_head.h"

namespace veomni {

struct ShardFromHfOptions {
  MeshShape mesh;          // world, ulysses, ep of the run that will resume
  bool overwrite = false;  // replace an existing non-empty output directory
};

struct ShardFromHfSummary {
  std::string out_dir;
  std::string model_type;
  ModelHead head = ModelHead::LanguageModel;  // from the directory's architectures (or score.* tensors)
  int64_t parameters = 0;   // parameter tensors
  int64_t elements = 0;     // their elements
  uint64_t bytes = 0;       // rank files' bytes
};

// Reads config.json and the weights (per-expert or stacked expert names, any float dtype) of hf_dir, checks the
// layout against the model, and writes the checkpoint directory out_dir atomically. A ...ForSequenceClassification
// or ...ForTokenClassification directory of one label becomes a checkpoint of the reward or value head (which
// veomni-train resumes under train.objective reward or value). One parameter is in memory at
// a time.
ShardFromHfSummary shard_hf_checkpoint(const std::string& hf_dir, const std::string& out_dir,
                                       const ShardFromHfOptions& options);

}  // namespace veomni
