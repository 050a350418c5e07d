// What the objectives read off a packed micro-batch: its preference pairs, its response-token mask, its rollout
// values, and host/device conversions of per-token values.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/batch.h"

namespace veomni {

// A preference pair of a packed row: the indices of its chosen and its rejected sequence in cu_seqlens.
struct PairIndex {
  size_t chosen = 0, rejected = 0;
};

// The row's pairs in order (each Chosen sequence is followed by its Rejected one, as the collator packs them).
std::vector<PairIndex> preference_pairs(const Batch& batch);

// 1 where this slice predicts a target (target_ids != ignore index): the response tokens of a rollout.
std::vector<uint8_t> response_mask(const Batch& batch);

// The per-token values of a rollout key on this slice; InputError naming the key when the batch has none.
std::vector<double> token_values_of(const Batch& batch, const std::string& key);

// An f32 tensor (any device) as doubles, and back onto `device`.
std::vector<double> host_doubles(const Tensor& values);
Tensor f32_tensor(const std::vector<double>& values, Device device);

}  // namespace veomni
