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
  // Registers `{prefix}blocks.{index}.{norm1,norm2,attn,mlp}.*` in the store's current group.
  VisionBlock(ParamStore& store, const VisionConfig& config, int64_t index);

  Tensor forward(const Tensor& h, const VisionLayerInputs& in, bool save);
  Tensor backward(const Tensor& dh, const VisionLayerInputs& in);
  void release();

 private:
  LayerNorm norm1_, norm2_;
  VisionAttention attention_;
  VisionMlp mlp_;
  LayerNorm::Saved norm1_saved_, norm2_saved_;
};

}  // namespace veomni
