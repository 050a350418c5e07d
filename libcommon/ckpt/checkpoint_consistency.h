// Cross-checks of a checkpoint before it is converted: metadata.json's parameter list against the model its own
// config implies, and against the tensors each rank file holds. An edited or mixed-up checkpoint is an InputError
// naming the file and key, not a HuggingFace directory whose config does not match its weights.
#pragma once
#include "ckpt/checkpoint_reader.h"

namespace veomni {

// Every parameter that metadata.json's model config (key 'model_config', or 'hf_config' for a multimodal model)
// implies is listed under 'parameters' with its full shape and expert flag, and nothing else is listed.
void check_params_match_model_config(const CheckpointReader& reader);

// Every rank file holds, in each field (master, exp_avg, exp_avg_sq), exactly the parameters metadata.json lists.
// Opens (and checksums) every rank file once; closes them after.
void check_rank_files_match_params(CheckpointReader& reader);

}  // namespace veomni
