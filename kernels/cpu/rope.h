// CPU rotary position embedding: cos/sin tables (1-D and interleaved M-RoPE) and their application (kernels/ops.h).
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace veomni::ops::cpu {

void rope_tables(const Tensor& positions, int64_t head_dim, double theta, const std::vector<int64_t>& mrope_section,
                 Tensor& cos, Tensor& sin);
void rope_apply(Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse);

}  // namespace veomni::ops::cpu
