// HF weights during training (train.checkpoint.save_hf_weights): a checkpoint's model as a HuggingFace directory
// inside it, written by veomni-ckpt-merge's code with its defaults.
#pragma once
#include <string>

#include "dist/communicator.h"

namespace veomni {

// The directory name inside global_step_N (VeOmni's).
inline constexpr const char* kHfWeightsDir = "hf_ckpt";

// Writes <checkpoint_dir>/hf_ckpt as `veomni-ckpt-merge <checkpoint_dir> --out <checkpoint_dir>/hf_ckpt` writes it
// (float32 masters, experts per expert, 5GB shards, the run's tokenizer files; an adapter checkpoint merged into its
// base model), atomically: staged under a temporary name and renamed, replacing an earlier one. Returns its path.
std::string write_checkpoint_hf_weights(const std::string& checkpoint_dir);

// Every rank calls it after saving checkpoint_dir: rank 0 writes its hf_ckpt while the others wait at a barrier.
void save_checkpoint_hf_weights(Communicator& world, const std::string& checkpoint_dir);

}  // namespace veomni
