// CPU attention of decoded tokens over a per-sequence KV cache (kernels/ops.h attention_kv_cache).
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace veomni::ops::cpu {

void attention_kv_cache(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                        const std::vector<int32_t>& slots, const std::vector<int32_t>& kv_lens, float scale,
                        Tensor& out);

}  // namespace veomni::ops::cpu
