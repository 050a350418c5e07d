// Vision self-attention: fused qkv projection with bias, 2-D rotary, non-causal attention bounded per frame, proj.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/param.h"
#include "model/parallel_hooks.h"
#include "model/layers/biased_linear.h"
#include "model/vision/vision_config.h"

namespace veomni {

// What every block of one vision forward shares.
struct VisionLayerInputs {
  Tensor cos, sin;                  // [N, head_dim] f32 (vision_rope_tables), this rank's rows under SP
  std::vector<int32_t> cu_seqlens;  // one segment per frame (frame_cu_seqlens), of the whole (padded) sequence
  // Ulysses SP over the patches: rows are this rank's slice and attention all-to-alls heads; null: none.
  SequenceHooks* sequence = nullptr;
};

class VisionAttention {
 public:
  struct Saved {
    BiasedLinear::Saved q_proj, k_proj, v_proj, proj;
    Tensor q, k, v, out, lse;  // the attention core's, every patch and this rank's heads under SP
  };
  struct Output {
    Tensor out;
    Saved saved;
  };

  // Registers `{prefix}qkv.{bias,weight}` ([3*hidden, hidden]: q rows, then k, then v) and `{prefix}proj.*`, each
  // weight followed by its LoRA adapter when targeted.
  VisionAttention(ParamStore& store, const VisionConfig& config, const std::string& prefix);

  // x [N, hidden] (normalised) -> [N, hidden]; saved is empty unless save.
  Output forward(const Tensor& x, const VisionLayerInputs& in, bool save) const;
  Tensor backward(Saved&& saved, const Tensor& dy, const VisionLayerInputs& in) const;

 private:
  int64_t num_heads_;
  int64_t head_dim_;
  float scale_;
  BiasedLinear qkv_;        // the fused qkv projection (and its LoRA adapter), registered first
  BiasedLinear q_, k_, v_;  // its row blocks
  BiasedLinear proj_;
};

}  // namespace veomni
