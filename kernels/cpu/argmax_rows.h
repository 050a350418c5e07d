// CPU argmax of every row of a matrix (kernels/decode_ops.h argmax_rows).
#pragma once
#include "core/tensor.h"

namespace veomni::ops::cpu {

void argmax_rows(const Tensor& x, Tensor& ids);

}  // namespace veomni::ops::cpu
