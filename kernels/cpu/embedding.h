// CPU embedding lookup and its gradient (kernels/ops.h).
#pragma once
#include "core/tensor.h"

namespace veomni::ops::cpu {

void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out);
void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable);

}  // namespace veomni::ops::cpu
