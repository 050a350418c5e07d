// Loads a HuggingFace reference fixture (tests/fixtures/hf/<name>, made by scripts/gen_hf_fixtures.py) into a Batch,
// the model config and the expected values; shared by the CPU and GPU fixture tests.
#pragma once
#include <cstdint>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/collator.h"
#include "io/json_file.h"
#include "model/model_config.h"

namespace veomni::testing {

struct HfFixture {
  std::string dir;
  nlohmann::json expected;
  Batch batch;
  ModelConfig config;
};

inline HfFixture load_hf_fixture(const std::string& name) {
  HfFixture f;
  f.dir = std::string(VEOMNI_FIXTURES_DIR) + "/hf/" + name;
  f.expected = read_json_file(f.dir + "/expected.json");
  const nlohmann::json batch = read_json_file(f.dir + "/batch.json");
  TokenSample whole;  // the fixture is already one packed row: positions restart per sample
  const auto ids = batch["input_ids"].get<std::vector<int64_t>>();
  const auto n = static_cast<int64_t>(ids.size());
  whole.input_ids = Tensor::from_vector(ids, {n});
  whole.labels = Tensor::from_vector(batch["labels"].get<std::vector<int64_t>>(), {n});
  whole.position_ids = Tensor::from_vector(batch["position_ids"].get<std::vector<int64_t>>(), {n});
  CollateOptions options;
  options.max_seq_len = n;
  PackedRow row = pack_samples({whole}, options);
  // Sample boundaries come from the restarting positions, as transformers derives them.
  row.cu_seqlens = {0};
  for (int64_t i = 1; i < n; ++i)
    if (whole.position_ids.data<int64_t>()[i] == 0) row.cu_seqlens.push_back(static_cast<int32_t>(i));
  row.cu_seqlens.push_back(static_cast<int32_t>(n));
  f.batch = slice_for_sp_rank(row, 1, 0);
  f.config = load_model_config(f.dir + "/model");
  return f;
}

// max |a-b| / max |b| over the whole tensor (any device, any float dtype): robust to individual zeros.
inline double relative_error(const Tensor& ours, const Tensor& ref) {
  const std::vector<float> a = ours.to(Device::cpu()).to_dtype(DType::F32).to_float_vector();
  const std::vector<float> b = ref.to(Device::cpu()).to_dtype(DType::F32).to_float_vector();
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

// A key projection's bias shifts all scores of a query row by the same q.b, which softmax cancels: its exact
// gradient is 0, and both implementations return rounding noise there (which AdamW then normalises into steps of
// noise). Such a gradient is checked to be at noise level against its layer's k_proj.weight gradient instead of
// against the other implementation's noise.
inline bool gradient_is_zero_in_exact_arithmetic(const std::string& name) {
  const std::string suffix = "k_proj.bias";
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

inline std::string matching_weight_name(const std::string& bias_name) {
  return bias_name.substr(0, bias_name.size() - 4) + "weight";
}

// max |grad| / max |weight_grad|: how far above rounding noise a gradient that should be 0 is.
inline double noise_level(const Tensor& grad, const Tensor& weight_grad) {
  const std::vector<float> w = weight_grad.to(Device::cpu()).to_dtype(DType::F32).to_float_vector();
  double scale = 1e-30;
  for (float v : w) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  const std::vector<float> g = grad.to(Device::cpu()).to_dtype(DType::F32).to_float_vector();
  double top = 0;
  for (float v : g) top = std::max(top, std::fabs(static_cast<double>(v)));
  return top / scale;
}

}  // namespace veomni::testing
