// HF initialisation from counter-based normal draws (core/rng.h), so that it is independent of sharding.
#include "model/init.h"

#include <cmath>

#include "core/rng.h"
#include "model/layers/lora_adapter.h"

namespace veomni {

InitSpec hf_init_spec(const std::string& name, const ModelConfig& config) {
  if (name.ends_with("norm.weight")) return InitSpec{InitSpec::Kind::Ones, 0.0};
  // HF's _init_weights zeroes a Linear's bias (the value head's score.bias, started from a causal LM).
  if (name.ends_with(".bias")) return InitSpec{InitSpec::Kind::Zeros, 0.0};
  return InitSpec{InitSpec::Kind::Normal, config.initializer_range};
}

void fill_init_values(const std::string& name, const InitSpec& spec, uint64_t seed, int64_t flat_begin, int64_t count,
                      float* out) {
  if (spec.kind == InitSpec::Kind::Uniform) {
    uint64_t mix = seed ^ hash_name(name);
    const uint64_t stream = splitmix64(mix);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) {
      uint64_t state = stream ^ (static_cast<uint64_t>(flat_begin + i) * 0xd1342543de82ef95ull);
      const double u = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;  // [0, 1)
      out[i] = static_cast<float>(spec.std * (2.0 * u - 1.0));
    }
    return;
  }
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
  VEOMNI_CHECK(param.takes_start_values(), "init of parameter '{}' that is not materialised", param.name);
  const Shape local = param.local_shape();
  const int64_t row = local.empty() || local[0] == 0 ? 0 : shape_numel(local) / local[0];
  const int64_t first = param.local_begin * row;  // the local rows' first element in the full tensor
  if (param.deferred) {
    param.start_values = [name = param.name, spec, seed, first](int64_t begin, int64_t count, float* out) {
      fill_init_values(name, spec, seed, first + begin, count, out);
    };
    return;
  }
  Tensor host = Tensor::empty(local, DType::F32);
  fill_init_values(param.name, spec, seed, first, host.numel(), host.data<float>());
  param.value.copy_from(param.value.dtype() == DType::F32 ? host : host.to_dtype(param.value.dtype()));
}

InitSpec lora_init_spec(const Parameter& param) {
  VEOMNI_CHECK(is_lora_param_name(param.name) && !param.shape.empty(), "'{}' is no LoRA adapter parameter",
               param.name);
  if (param.name.ends_with(".lora_B.weight")) return InitSpec{InitSpec::Kind::Zeros, 0.0};
  return InitSpec{InitSpec::Kind::Uniform, 1.0 / std::sqrt(static_cast<double>(param.shape.back()))};
}

void init_lora_adapters(ParamStore& store, uint64_t seed) {
  for (const auto& param : store.all())
    if (is_lora_param_name(param->name) && param->takes_start_values())
      init_parameter(*param, lora_init_spec(*param), seed);
}

}  // namespace veomni
