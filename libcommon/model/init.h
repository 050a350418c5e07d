// Deterministic, layout-independent parameter initialisation (HF scheme) from (seed, parameter name, element index).
#pragma once
#include <cstdint>
#include <string>

#include "model/model_config.h"
#include "model/param.h"

namespace veomni {

struct InitSpec {
  enum class Kind { Normal, Ones, Zeros, Uniform };
  Kind kind = Kind::Normal;
  double std = 0.02;   // Normal: the standard deviation; Uniform: the bound b of U(-b, b)
};

// HF's _init_weights: ones for every RMSNorm weight, normal(0, initializer_range) for everything else (linear,
// embedding, router, stacked experts).
InitSpec hf_init_spec(const std::string& name, const ModelConfig& config);

// Writes elements [flat_begin, flat_begin + count) (row-major) of the full tensor called `name`. Element i's value
// depends only on (seed, name, i), so any shard of a tensor reproduces exactly its part of the whole.
void fill_init_values(const std::string& name, const InitSpec& spec, uint64_t seed, int64_t flat_begin, int64_t count,
                      float* out);

// Fills a materialised parameter's value (its local rows) in the value's dtype and device; of a deferred one, sets
// its start values to the same numbers.
void init_parameter(Parameter& param, const InitSpec& spec, uint64_t seed);

// PEFT's LoRA init: lora_A kaiming-uniform with a = sqrt(5), i.e. U(-1/sqrt(in), 1/sqrt(in)) with `in` its last
// dimension (per expert for [E, r, in]), lora_B zeros. Drawn from (seed, name, element) as every other parameter.
InitSpec lora_init_spec(const Parameter& param);
// Initialises every materialised or deferred adapter parameter of the store (model/layers/lora_adapter.h names).
void init_lora_adapters(ParamStore& store, uint64_t seed);

}  // namespace veomni
