// The CUDA backend of the op API: every op of kernels/op_list.h, kernels/decode_op_list.h and kernels/fp8_op_list.h
// with the CPU backend's signatures, for tensors on Device::cuda(), one .cu file per op family. kernels/dispatch.cc (and
// kernels/speech_dispatch.cc) check shapes, dtypes and devices before calling them. Activations and weights may be
// f32 or bf16, each tensor independently (sums in fp32 or wider); statistics, tables and states stay f32.
// Every op is queued on cuda_rt::stream(); only those that return host data (sum, sum_squares, moe_permute's
// counts) and the index range checks (labels, token ids) wait for the device.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/decode_layer.h"
#include "kernels/ops.h"

namespace veomni::ops::cuda {

#define VEOMNI_OP(return_type, name, params) return_type name params;
#include "kernels/op_list.h"
#define VEOMNI_OP(return_type, name, params) return_type name params;
#define VEOMNI_CUDA_ONLY_OP(return_type, name, params) return_type name params;
#include "kernels/decode_op_list.h"
#define VEOMNI_OP(return_type, name, params) return_type name params;
#include "kernels/fp8_op_list.h"

// Settings of the backend, not ops.

// gemm.cu: true: grouped GEMMs run as one cuBLASLt call per group instead of one grouped call
// (train.kernels.grouped_gemm loop; VEOMNI_GROUPED_GEMM=loop until set).
void set_grouped_gemm_loop(bool loop);

}  // namespace veomni::ops::cuda
