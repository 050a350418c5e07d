// One packed micro-batch as the model consumes it (after collation, and after the Ulysses slice when SP is on).
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace veomni {

inline constexpr int64_t kIgnoreIndex = -100;

// What a packed sequence is: plain (SFT, rollouts, padding), or one half of a preference pair. A Chosen sequence is
// always immediately followed by its Rejected one in cu_seqlens order.
enum class SequenceRole : uint8_t { Plain, Chosen, Rejected };

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

  // Role of every sequence of cu_seqlens (cu_seqlens.size() - 1 entries, the padding sequence Plain), global like
  // cu_seqlens: the same on every SP rank.
  std::vector<SequenceRole> sequence_roles;
  // Per-token f32 [S] values of the dataset's rollout keys (returns, old_values, advantages, old_log_probs,
  // ref_log_probs; absent keys are absent here), ALREADY SHIFTED and sliced like target_ids: token_values[k][i]
  // belongs to predicting target_ids[i]; 0 wherever target_ids[i] is kIgnoreIndex (prompts, boundaries, padding).
  std::map<std::string, Tensor> token_values;
  // Per-sequence values in cu_seqlens order (cu_seqlens.size() - 1 entries each). "ref_logps": the dataset's
  // ref_chosen_logps on each Chosen sequence, its ref_rejected_logps on the Rejected one, 0 elsewhere; present only
  // when the dataset has both keys.
  std::map<std::string, std::vector<float>> sequence_values;

  // Leading rows of this slice that are real tokens (the rest is padding).
  int64_t local_real_tokens() const {
    const int64_t local = input_ids.defined() ? input_ids.dim(0) : 0;
    if (row_real_tokens < 0) return local;
    return row_real_tokens <= sp_offset ? 0 : std::min(local, row_real_tokens - sp_offset);
  }
};

}  // namespace veomni
