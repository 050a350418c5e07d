// CPU SwiGLU activation, split and fused layouts (kernels/ops.h).
#pragma once
#include "core/tensor.h"

namespace veomni::ops::cpu {

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out);
void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup);
void swiglu_fused_forward(const Tensor& gate_up, Tensor& out);
void swiglu_fused_backward(const Tensor& dout, const Tensor& gate_up, Tensor& dgate_up);

}  // namespace veomni::ops::cpu
