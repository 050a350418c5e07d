// What every decoder layer of one micro-batch shares: RoPE tables, the global packed layout and the parallel seams.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "model/parallel_hooks.h"

namespace veomni {

struct LayerInputs {
  Tensor cos;                       // [S_local, head_dim] f32, from this slice's position ids
  Tensor sin;                       // [S_local, head_dim] f32
  std::vector<int32_t> cu_seqlens;  // global (unsliced) packed layout
  int64_t real_rows = 0;            // leading rows of this slice that are real tokens (the rest is SP padding)
  SequenceHooks* sequence = nullptr;
  ExpertHooks* experts = nullptr;
};

}  // namespace veomni
