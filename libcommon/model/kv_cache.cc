// KV cache allocation.
#include "model/kv_cache.h"

namespace veomni {

KvCache KvCache::allocate(const ModelConfig& config, int64_t sequences, int64_t capacity, DType dtype, Device device) {
  KvCache cache;
  const Shape shape{sequences, capacity, config.num_key_value_heads, config.head_dim};
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    cache.k.push_back(Tensor::zeros(shape, dtype, device));
    cache.v.push_back(Tensor::zeros(shape, dtype, device));
  }
  return cache;
}

}  // namespace veomni
