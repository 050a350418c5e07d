// One packed micro-batch as the model consumes it (after collation, and after the Ulysses slice when SP is on).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace veomni {

inline constexpr int64_t kIgnoreIndex = -100;

struct Batch {
  // Token ids i64 [S] of this rank's slice (S = local sequence length).
  Tensor input_ids;
  // Targets i64 [S], ALREADY SHIFTED: target[i] is the token to predict at position i (HF's labels[i+1]);
  // kIgnoreIndex where nothing is predicted (last token of each sample, prompts, padding).
  Tensor target_ids;
  // Position ids i64 [S] (1-D RoPE) or [3, S] (M-RoPE), restarting at 0 for every packed sample.
  Tensor position_ids;
  // Global (unsliced) packed layout: sequences [cu[b], cu[b+1]) of the full packed row; cu.back() = S * sp_size.
  std::vector<int32_t> cu_seqlens;
  // Where this rank's slice starts in the full packed row (0 without SP).
  int64_t sp_offset = 0;
  // Non-ignored targets in this slice (computed by the collator).
  int64_t valid_tokens = 0;
  // Tokens of the full packed row before the padding that makes it divisible by the SP size (-1: no padding).
  // Padding is always at the end of the row; it must not count in statistics such as the MoE aux loss.
  int64_t row_real_tokens = -1;

  // Leading rows of this slice that are real tokens (the rest is padding).
  int64_t local_real_tokens() const {
    const int64_t local = input_ids.defined() ? input_ids.dim(0) : 0;
    if (row_real_tokens < 0) return local;
    return row_real_tokens <= sp_offset ? 0 : std::min(local, row_real_tokens - sp_offset);
  }
};

}  // namespace veomni
