// Helpers of the speech-stage tests: seeded random parameter values and tiny Qwen3-Omni speech configs.
#pragma once
#include <cmath>
#include <random>
#include <string>

#include "model/param.h"

namespace veomni::speech_test {

// Normal values scaled by 1/sqrt(fan_in) for matrices, 1 + small noise for norms, small values for the rest
// (biases, layer scales, SnakeBeta's log-scale parameters), so that activations stay of order one.
inline void randomize(ParamStore& store, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const auto& p : store.all()) {
    float* v = p->value.data<float>();
    const bool is_norm = p->name.find("norm") != std::string::npos && p->shape.size() == 1;
    const double fan_in = p->shape.size() >= 2 ? static_cast<double>(p->value.numel() / p->shape[0]) : 1.0;
    for (int64_t i = 0; i < p->value.numel(); ++i) {
      const float n = normal(rng);
      if (is_norm)
        v[i] = 1.0f + 0.1f * n;
      else if (p->shape.size() >= 2)
        v[i] = static_cast<float>(n / std::sqrt(fan_in));
      else
        v[i] = 0.1f * n;
    }
  }
}

}  // namespace veomni::speech_test
