// The 2x2 patch merger: LayerNorm, groups of merge_unit consecutive patches concatenated, Linear-GELU-Linear.
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "model/param.h"
#include "model/layers/layer_norm.h"
#include "model/vision/vision_config.h"
#include "model/vision/vision_mlp.h"

namespace veomni {

class VisionMerger {
 public:
  struct Saved {
    LayerNorm::Saved norm;
    VisionMlp::Saved mlp;
  };
  struct Output {
    Tensor out;
    Saved saved;
  };

  // Registers the merger under `name` (e.g. "model.visual.merger" or "model.visual.deepstack_merger_list.0") with
  // the flavour's parameter names. post_shuffle: the deepstack mergers normalise the concatenated
  // [merge_unit*hidden] rows; the final merger normalises each patch's [hidden] before concatenating.
  VisionMerger(ParamStore& store, const VisionConfig& config, const std::string& name, bool post_shuffle);

  // x [N, hidden] -> [N / merge_unit, out_hidden_size]; saved is empty unless save.
  Output forward(const Tensor& x, bool save) const;
  // Returns dx [N, hidden].
  Tensor backward(Saved&& saved, const Tensor& dy) const;

 private:
  int64_t hidden_;
  int64_t merged_;
  bool post_shuffle_;
  LayerNorm norm_;
  VisionMlp mlp_;
};

}  // namespace veomni
