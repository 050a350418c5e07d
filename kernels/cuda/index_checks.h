// Range checks of index tensors on the GPU (labels, token ids), run before the kernels that read them when the debug
// checks are on (train.kernels.debug_checks; the collator validates every id on the host before it reaches a device).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace veomni::ops::cuda {

// Turns the device-side range checks on or off for the rest of the process (VEOMNI_DEBUG_CHECKS=1 until set). Off by
// default: each check waits for the device.
void set_debug_checks(bool on);
bool debug_checks_enabled();

// With the debug checks on: every ids[i] (i64, on the device) lies in [0, limit), except values equal to *skip when
// skip is given. Bad data from the user: throws InputError naming the op, the first bad position and its value, with
// the hint appended. Waits for the device (one small read). With them off it does nothing.
void check_ids_in_range(const char* op, const char* name, const Tensor& ids, int64_t limit, const char* hint,
                        const int64_t* skip = nullptr);

}  // namespace veomni::ops::cuda
