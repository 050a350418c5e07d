// Ops of KV-cache decoding whose index tables live on the device, so that a decode step uploads them once without
// waiting for the device and every layer reads them there: the upload itself, attention over the cache, the write of
// a step's keys and values into it, and the greedy choice (argmax) of the logits.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/decode_layer.h"

namespace veomni::ops {

// The ops, with their documentation: kernels/decode_op_list.h.
#define VEOMNI_OP(return_type, name, params) return_type name params;
#define VEOMNI_CUDA_ONLY_OP(return_type, name, params) return_type name params;
#include "kernels/decode_op_list.h"

}  // namespace veomni::ops
