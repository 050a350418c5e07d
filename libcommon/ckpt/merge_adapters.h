// veomni-ckpt-merge's work on an adapter (LoRA) checkpoint: PEFT's adapter directory, or the merged model (the base
// model's weights plus every adapter's scale * B A) as a HuggingFace model directory.
#pragma once
#include <string>

#include "ckpt/merge_to_hf.h"

namespace veomni {

// Writes out_dir as PEFT's adapter directory (adapter_model.safetensors, adapter_config.json: ckpt/peft_adapter.h),
// atomically. A reward or value head (score.*) has no place in it: InputError with a hint to merge instead.
MergeSummary write_adapter_checkpoint_as_peft(const std::string& checkpoint, const std::string& out_dir,
                                              const MergeOptions& options);

// Writes out_dir as merge_checkpoint_to_hf writes a whole model's checkpoint, the weights being those of the base
// model the checkpoint names (model.model_path, checked against its checksums: InputError when it changed) with each
// adapter's delta added in float32, and the head's score.* taken from the checkpoint. A randomly initialised base is
// refused (nothing on disk to merge into). Memory stays bounded by the largest parameter plus the adapters.
MergeSummary merge_adapter_checkpoint_to_hf(const std::string& checkpoint, const std::string& out_dir,
                                            const MergeOptions& options);

}  // namespace veomni
