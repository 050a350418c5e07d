// CPU ops over a per-sequence KV cache (kernels/decode_ops.h attention_kv_cache, kv_cache_write).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace veomni::ops::cpu {

void attention_kv_cache(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& cache_rows,
                        float scale, Tensor& out);
void kv_cache_write(const Tensor& rows, const Tensor& dest, Tensor& cache);

}  // namespace veomni::ops::cpu
