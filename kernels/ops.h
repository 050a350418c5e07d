// The op API: every compute primitive the models use, forward and backward, dispatched on the tensors' device.
//
// Conventions (all ops):
// - Tensors are contiguous, row-major. Shapes are given as [..] in the comments and checked.
// - The CPU backend (kernels/cpu/) is the fp32 reference: it accepts f32 (and i32/i64 index tensors).
//   The CUDA backend (kernels/cuda/) accepts f32 and bf16 activations/weights with fp32 accumulation.
// - "accumulates" means the op adds into the output (gradients of parameters: dW += ...); everything else
//   overwrites its outputs. Outputs are allocated by the caller.
// - All tensors of one call live on one device; an op throws veomni::Error on a shape/dtype/device mismatch.
//
// Adding an op: its signature and documentation go once into kernels/op_list.h (kernels/decode_op_list.h for an op
// of decoding, kernels/fp8_op_list.h for an FP8 op), which this header (decode_ops.h, fp8_ops.h) and both backends
// (kernels/cpu/ops_cpu.h, kernels/cuda/ops_cuda.h) expand; its checks and routing into kernels/dispatch.cc (speech
// ops: kernels/speech_dispatch.cc, FP8 ops: kernels/fp8_dispatch.cc); its kernels into
// veomni::ops::cpu (kernels/cpu/<family>.cc) and veomni::ops::cuda (kernels/cuda/<family>.cu).
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace veomni::ops {

// The tensors of one parameter's AdamW update (same numel) and its decoupled weight decay, for adamw_step_multi.
// param and grad are f32. The two moments are both f32 (torch's AdamW) or both bf16 (anyprecision_adamw's state): a
// bf16 moment is widened, updated by the f32 expression, rounded to nearest even when stored, and the parameter's
// update reads the stored (rounded) moments; with f32 moments the rounding is the identity. compute (optional; bf16
// or f16): receives the updated param cast to its dtype in the same pass, the bits cast(param, *compute) gives after
// the step.
struct AdamWTensors {
  Tensor* param = nullptr;
  const Tensor* grad = nullptr;
  Tensor* exp_avg = nullptr;
  Tensor* exp_avg_sq = nullptr;
  double weight_decay = 0.0;
  Tensor* compute = nullptr;
};

// The GELU of gelu_forward and gelu_backward: torch gelu(approximate='none'): 0.5 x (1 + erf(x/sqrt(2))); 'tanh'
// (HF gelu_pytorch_tanh): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
enum class GeluKind { Erf, Tanh };

// The ops, with their documentation: kernels/op_list.h.
#define VEOMNI_OP(return_type, name, params) return_type name params;
#define VEOMNI_COMPOSED_OP(return_type, name, params) return_type name params;
#define VEOMNI_DEFAULT(value) = value
#include "kernels/op_list.h"

}  // namespace veomni::ops
