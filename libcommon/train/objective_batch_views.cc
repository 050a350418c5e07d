// Preference pairs, response masks and rollout values of a packed micro-batch.
#include "train/objective_batch_views.h"

#include "core/error.h"

namespace veomni {

std::vector<PairIndex> preference_pairs(const Batch& batch) {
  const std::vector<SequenceRole>& roles = batch.sequence_roles;
  std::vector<PairIndex> pairs;
  for (size_t j = 0; j < roles.size(); ++j) {
    if (roles[j] != SequenceRole::Chosen) continue;
    VEOMNI_CHECK(j + 1 < roles.size() && roles[j + 1] == SequenceRole::Rejected,
                 "packed sequence {} is a chosen sequence without its rejected one", j);
    pairs.push_back({j, j + 1});
  }
  return pairs;
}

std::vector<uint8_t> response_mask(const Batch& batch) {
  const Tensor targets = batch.target_ids.is_cpu() ? batch.target_ids : batch.target_ids.to(Device::cpu());
  const int64_t* t = targets.data<int64_t>();
  std::vector<uint8_t> mask(static_cast<size_t>(targets.numel()));
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = t[i] != kIgnoreIndex;
  return mask;
}

std::vector<double> token_values_of(const Batch& batch, const std::string& key) {
  const auto found = batch.token_values.find(key);
  VEOMNI_INPUT_CHECK(found != batch.token_values.end(),
                     "the micro-batch has no per-token '{}' (a dataset key of rollouts: see veomni-data(5))", key);
  return host_doubles(found->second);
}

std::vector<double> host_doubles(const Tensor& values) {
  VEOMNI_CHECK(values.dtype() == DType::F32, "per-token values {} must be f32", values.describe());
  const Tensor host = values.is_cpu() ? values : values.to(Device::cpu());
  const float* v = host.data<float>();
  return std::vector<double>(v, v + host.numel());
}

Tensor f32_tensor(const std::vector<double>& values, Device device) {
  Tensor host = Tensor::empty({static_cast<int64_t>(values.size())}, DType::F32);
  float* out = host.data<float>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<float>(values[i]);
  return host.to(device);
}

}  // namespace veomni
