// Helpers the talker and the code predictor share: RoPE layer inputs of one unpacked sequence, the cached steps of
// one sequence, row concatenation, greedy argmax of a logits row.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "model/kv_cache.h"
#include "model/layer_inputs.h"

namespace veomni {

// LayerInputs of one sequence of positions.dim(-1) tokens (positions i64 [T] or [3, T] on the host; an empty
// mrope_section for [T]): its RoPE tables on `device` and cu_seqlens {0, T}.
LayerInputs single_sequence_inputs(const Tensor& positions, int64_t head_dim, double theta,
                                   const std::vector<int64_t>& mrope_section, Device device);
// The cached step of `rows` new tokens of the one sequence in slot 0 of a cache of `capacity` rows, written from cache
// row `start` (0 for the prompt, then one row a step) at positions start.., with its text-only RoPE tables and cache
// rows on `device`.
CachedStep single_sequence_step(int64_t start, int64_t rows, int64_t capacity, int64_t head_dim, double theta,
                                Device device);
// Positions first..first+count-1 (i64 [count], host).
Tensor arange_positions(int64_t count, int64_t first = 0);
// [a; b]: rows of a then rows of b (same width, dtype and device).
Tensor concat_rows(const Tensor& a, const Tensor& b);
// The index of the largest entry of row [V] (the first one on ties, as torch.argmax), skipping tokens for which
// `banned` is true.
int64_t greedy_token(const Tensor& row, const std::function<bool(int64_t)>& banned = nullptr);

}  // namespace veomni
