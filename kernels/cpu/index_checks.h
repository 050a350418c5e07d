// Range checks of index tensors the CPU kernels read (labels, token ids, expert ids, row maps), run before any work.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace veomni::ops::cpu {

// Every ids[i] lies in [0, limit), except values equal to `skip` when skip_value is set. Bad data from the user
// (token ids, labels): throws InputError naming the op, the position and the value, with the hint appended.
void check_ids_in_range(const char* op, const char* name, const Tensor& ids, int64_t limit, const char* hint,
                        const int64_t* skip = nullptr);
// Same for an i32 tensor produced by another op (expert ids): an internal error.
void check_experts_in_range(const char* op, const Tensor& topk_idx, int64_t num_experts);
// row_map is a permutation of [0, numel): every permuted row written exactly once (as moe_permute makes it).
void check_row_map(const char* op, const Tensor& row_map);

}  // namespace veomni::ops::cpu
