// HF initialisation from counter-based normal draws (core/rng.h), so that it is independent of sharding.
#include "model/init.h"

#include "core/rng.h"

namespace veomni {

namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

InitSpec hf_init_spec(const std::string& name, const ModelConfig& config) {
  if (ends_with(name, "norm.weight")) return InitSpec{InitSpec::Kind::Ones, 0.0};
  // HF's _init_weights zeroes a Linear's bias (the value head's score.bias, started from a causal LM).
  if (ends_with(name, ".bias")) return InitSpec{InitSpec::Kind::Zeros, 0.0};
  return InitSpec{InitSpec::Kind::Normal, config.initializer_range};
}

void fill_init_values(const std::string& name, const InitSpec& spec, uint64_t seed, int64_t flat_begin, int64_t count,
                      float* out) {
  if (spec.kind != InitSpec::Kind::Normal) {
    const float value = spec.kind == InitSpec::Kind::Ones ? 1.0f : 0.0f;
    for (int64_t i = 0; i < count; ++i) out[i] = value;
    return;
  }
  uint64_t mix = seed ^ hash_name(name);
  const uint64_t stream = splitmix64(mix);
  // Counter-based draws: threads give the same values as one thread (a 1B-parameter model draws in seconds).
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i)
    out[i] = static_cast<float>(spec.std * normal_at(stream, static_cast<uint64_t>(flat_begin + i)));
}

void init_parameter(Parameter& param, const InitSpec& spec, uint64_t seed) {
  VEOMNI_CHECK(param.value.defined(), "init of parameter '{}' that is not materialised", param.name);
  const Shape local = param.local_shape();
  const int64_t row = local.empty() || local[0] == 0 ? 0 : shape_numel(local) / local[0];
  Tensor host = Tensor::empty(local, DType::F32);
  fill_init_values(param.name, spec, seed, param.local_begin * row, host.numel(), host.data<float>());
  param.value.copy_from(param.value.dtype() == DType::F32 ? host : host.to_dtype(param.value.dtype()));
}

}  // namespace veomni
