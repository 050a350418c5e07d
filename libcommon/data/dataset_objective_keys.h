// The dataset keys of preference pairs and rollouts (man veomni-data(5)), their checks, and the format version
// a file holding them needs.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace veomni {

class DatasetReader;

// A preference pair is one sample: the chosen sequence, then the rejected one. chosen_length i64 [1] holds the
// chosen sequence's token count (1 <= chosen_length < L).
inline constexpr const char* kChosenLengthKey = "chosen_length";
// Optional per-pair reference log-probabilities (sum over the label tokens of each sequence), f32 [1] each.
inline constexpr const char* kRefChosenLogpsKey = "ref_chosen_logps";
inline constexpr const char* kRefRejectedLogpsKey = "ref_rejected_logps";
// Per-token f32 [L] rollout keys, aligned with labels: entry i belongs to predicting labels[i].
inline constexpr std::array<const char*, 5> kRolloutKeys = {"returns", "old_values", "advantages", "old_log_probs",
                                                            "ref_log_probs"};

bool is_rollout_key(std::string_view name);
// chosen_length, ref_chosen_logps or ref_rejected_logps: one entry per sample.
bool is_pair_key(std::string_view name);

// The oldest format version that describes a file with these keys: 1 for SFT data, 2 once a preference or rollout
// key is present (a version-1 reader would train such a file as plain SFT data, so it must refuse it).
int64_t dataset_format_version_for(const std::vector<std::string>& key_names);

// InputError "<file>: no key 'advantages', which <purpose> needs (keys: ...)" for the first of `keys` the dataset
// lacks: what a trainer calls before its first step (purpose e.g. "train.objective ppo_actor").
void require_dataset_keys(const DatasetReader& reader, const std::vector<std::string>& keys, std::string_view purpose);

// InputError "<context>: key '<key>'[i] = nan is not finite" for the first NaN or infinity of an f32 tensor.
void check_finite_values(const Tensor& values, std::string_view key, std::string_view context);

}  // namespace veomni
