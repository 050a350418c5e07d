// The CPU backend of the op API, the fp32 reference of every other path: every op of kernels/op_list.h,
// kernels/decode_op_list.h and kernels/fp8_op_list.h (but those marked CUDA-only) for f32 tensors in host memory,
// one .cc file per op family.
// kernels/dispatch.cc (and kernels/speech_dispatch.cc) check shapes, dtypes and devices before calling them.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace veomni::ops::cpu {

#define VEOMNI_OP(return_type, name, params) return_type name params;
#include "kernels/op_list.h"
#define VEOMNI_OP(return_type, name, params) return_type name params;
#include "kernels/decode_op_list.h"
#define VEOMNI_OP(return_type, name, params) return_type name params;
#include "kernels/fp8_op_list.h"

}  // namespace veomni::ops::cpu
