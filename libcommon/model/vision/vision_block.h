// One pre-norm vision block: h + attn(norm1(h)), then + mlp(norm2(h)).
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "model/param.h"
#include "model/layers/layer_norm.h"
#include "model/vision/vision_attention.h"
#include "model/vision/vision_config.h"
#include "model/vision/vision_mlp.h"

namespace veomni {

class VisionBlock {
 public:
  struct Saved {
    LayerNorm::Saved norm1, norm2;
    VisionAttention::Saved attention;
    VisionMlp::Saved mlp;
  };
  struct Output {
    Tensor out;
    Saved saved;
  };

  // Registers `{prefix}blocks.{index}.{norm1,norm2,attn,mlp}.*` in the store's current group.
  VisionBlock(ParamStore& store, const VisionConfig& config, int64_t index);

  // saved is empty unless save.
  Output forward(const Tensor& h, const VisionLayerInputs& in, bool save) const;
  Tensor backward(Saved&& saved, const Tensor& dh, const VisionLayerInputs& in) const;

 private:
  LayerNorm norm1_, norm2_;
  VisionAttention attention_;
  VisionMlp mlp_;
};

}  // namespace veomni
