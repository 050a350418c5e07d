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

}  // namespace veomni::testing
