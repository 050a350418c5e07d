// KV cache allocation, and the upload of a cached step's rows.
#include "model/kv_cache.h"

#include "kernels/decode_ops.h"

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

void CachedStep::upload_rows(int64_t capacity, Device device) {
  const int64_t s = cu_seqlens.back(), n = sequences();
  const bool decode = one_token_each();
  std::vector<int32_t> table;
  table.reserve(static_cast<size_t>(s + (decode ? 2 * n : 0)));
  for (size_t i = 0; i < slots.size(); ++i)
    for (int32_t t = 0; t < cu_seqlens[i + 1] - cu_seqlens[i]; ++t)
      table.push_back(static_cast<int32_t>(slots[i] * capacity + starts[i] + t));
  if (decode) {
    table.insert(table.end(), slots.begin(), slots.end());
    for (int32_t start : starts) table.push_back(start + 1);
  }
  const Tensor uploaded = ops::upload(Tensor::from_vector(table, {static_cast<int64_t>(table.size())}), device);
  write_rows = uploaded.slice(0, s);
  cache_rows = decode ? uploaded.slice(s, s + 2 * n).view({2, n}) : Tensor();
}

}  // namespace veomni
