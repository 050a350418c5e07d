// Deterministic, layout-independent parameter initialisation (HF scheme) from (seed, parameter name, element index).
#pragma once
#include <cstdint>
#include <string>

#include "model/model_config.h"
#include "model/param.h"

namespace veomni {

struct InitSpec {
  enum class Kind { Normal, Ones, Zeros };
  Kind kind = Kind::Normal;
  double std = 0.02;
};

// HF's _init_weights: ones for every RMSNorm weight, normal(0, initializer_range) for everything else (linear,
// embedding, router, stacked experts).
InitSpec hf_init_spec(const std::string& name, const ModelConfig& config);

// Writes elements [flat_begin, flat_begin + count) (row-major) of the full tensor called `name`. Element i's value
// depends only on (seed, name, i), so any shard of a tensor reproduces exactly its part of the whole.
void fill_init_values(const std::string& name, const InitSpec& spec, uint64_t seed, int64_t flat_begin, int64_t count,
                      float* out);

// Fills a materialised parameter's value (its local rows) in the value's dtype and device.
void init_parameter(Parameter& param, const InitSpec& spec, uint64_t seed);

}  // namespace veomni
