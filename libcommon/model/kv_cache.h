// The key/value caches of a batch of sequences being decoded, and the layout of one cached forward step over them.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "model/model_config.h"

namespace veomni {

// One cache per decoder layer, contiguous per sequence: k[layer], v[layer] [sequences, capacity, kv_heads, head_dim]
// in the compute dtype. Row j of a sequence holds its j-th token's rotated key and its value.
struct KvCache {
  std::vector<Tensor> k, v;

  static KvCache allocate(const ModelConfig& config, int64_t sequences, int64_t capacity, DType dtype, Device device);
  int64_t sequences() const { return k.empty() ? 0 : k.front().dim(0); }
  int64_t capacity() const { return k.empty() ? 0 : k.front().dim(1); }
};

// The tokens of one cached step, packed by sequence: the step's i-th sequence owns rows [cu_seqlens[i],
// cu_seqlens[i+1]), lives in cache slot slots[i], and its first token of the step goes to cache row starts[i].
// A prefill step (some sequence with several tokens) starts every sequence at row 0 and attends within the step's
// tokens; a decode step (one token per sequence) attends to the cached rows [0, starts[i] + 1).
struct CachedStep {
  std::vector<int32_t> cu_seqlens, slots, starts;
  Tensor cos, sin;  // [S, head_dim] f32 RoPE tables of the step's positions (the body fills them)
  // On the model's device, uploaded once for every layer by upload_rows() (or set by the caller, whose buffers a
  // recorded decode step reads: TextBody::forward_cached uploads only when write_rows is undefined): the flat cache row (slot * capacity + row)
  // each token's key and value go to, i32 [S]; and for a decode step the attention's cache rows, i32 [2, N] (slots,
  // then kv lengths starts[i] + 1).
  Tensor write_rows, cache_rows;

  int64_t sequences() const { return static_cast<int64_t>(slots.size()); }
  bool one_token_each() const { return cu_seqlens.back() == static_cast<int32_t>(slots.size()); }
  // Fills write_rows and cache_rows from the host layout: one upload that does not wait for the device.
  void upload_rows(int64_t capacity, Device device);
};

}  // namespace veomni
