// Packs text samples into one row (VeOmni's packing), shifts labels into targets, pads and slices for Ulysses SP.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/batch.h"
#include "data/sample.h"

namespace veomni {

// The token-level keys of one stored sample. labels and position_ids may be undefined: labels then default to
// input_ids (plain language modelling) and positions to arange(L).
struct TokenSample {
  Tensor input_ids;     // i64 [L]
  Tensor labels;        // i64 [L]
  Tensor position_ids;  // i64 [L] or [3, L]
  std::string context;  // where it came from, for errors: "train.h5 sample 12"
  // > 0: a preference pair (man veomni-data): the chosen sequence is tokens [0, chosen_length), the rejected one
  // the rest, with its positions restarting at 0.
  int64_t chosen_length = 0;
  // Rollout keys, f32 [L] each, aligned with labels (entry i belongs to predicting labels[i]).
  std::map<std::string, Tensor> token_values;
  // A pair's ref_chosen_logps / ref_rejected_logps, f32 [1] each.
  std::map<std::string, Tensor> pair_values;
};

// Fills chosen_length, token_values and pair_values from the stored keys that the sample has (chosen_length,
// the rollout keys, ref_chosen_logps, ref_rejected_logps); InputError naming the context for a malformed one.
void read_objective_keys(const Sample& sample, TokenSample& out);

// The TokenSample of a stored text sample: input_ids (required), labels, position_ids and the objective keys.
TokenSample token_sample_from(const Sample& sample, const std::string& context);

struct CollateOptions {
  int64_t max_seq_len = 2048;  // each sample is truncated to this many tokens (the plan counts the same)
  int64_t sp_size = 1;         // the packed row is padded to a multiple of sp_size * pad_scale and sliced
  int64_t pad_scale = 1;
  int64_t vocab_size = 0;      // > 0: every input id and label (but kIgnoreIndex) must lie in [0, vocab_size)
};

// One packed row before the SP slice.
struct PackedRow {
  Tensor input_ids;     // i64 [T]
  Tensor target_ids;    // i64 [T]: labels shifted by one inside the row, kIgnoreIndex at sample ends and padding
  Tensor position_ids;  // i64 [T] or [3, T]
  std::vector<int32_t> cu_seqlens;  // sample boundaries; padding (if any) is a last sequence of its own
  int64_t valid_tokens = 0;         // non-ignored targets in the row
  int64_t real_tokens = 0;          // tokens before padding
  std::vector<SequenceRole> sequence_roles;                  // one per sequence of cu_seqlens
  std::map<std::string, Tensor> token_values;                // f32 [T], shifted like target_ids (see Batch)
  std::map<std::string, std::vector<float>> sequence_values;  // per sequence (see Batch)
};

// Concatenates samples (InputErrors name the sample's context and the key); the first label of every later sample
// becomes kIgnoreIndex (nothing is predicted across a boundary), then shifts: target[i] = label[i+1]. Pads with input
// 0, target kIgnoreIndex, position 0. A preference pair stays whole (longer than max_seq_len: InputError) and becomes
// two sequences, Chosen then Rejected, with nothing predicted across its boundary. Token values are shifted like the
// labels; every sample must have the same rollout keys, finite, of input_ids' length.
PackedRow pack_samples(const std::vector<TokenSample>& samples, const CollateOptions& options);

// This SP rank's slice of the row: tokens [rank*T/P, (rank+1)*T/P) (token_values too) with the row's global
// cu_seqlens, sequence roles and sequence values.
Batch slice_for_sp_rank(const PackedRow& row, int64_t sp_size, int64_t sp_rank);

}  // namespace veomni
