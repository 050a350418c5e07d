// Range checks of index tensors on the GPU (labels, token ids), run before the kernels that read them.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace veomni::ops::cuda {

// Every ids[i] (i64, on the device) lies in [0, limit), except values equal to *skip when skip is given. Bad data
// from the user: throws InputError naming the op, the first bad position and its value, with the hint appended.
// Waits for the device (one small read).
void check_ids_in_range(const char* op, const char* name, const Tensor& ids, int64_t limit, const char* hint,
                        const int64_t* skip = nullptr);

}  // namespace veomni::ops::cuda
