// Vision MLP forward and backward.
#include "model/vision/vision_mlp.h"

#include "model/layers/common.h"

namespace veomni {

VisionMlp::Output VisionMlp::forward(const Tensor& x, bool save) const {
  Output result;
  Saved& saved = result.saved;
  Tensor pre = take_out(fc1_.forward(x, save), saved.fc1);
  Tensor act = empty_like(pre, pre.shape());
  ops::gelu_forward(pre, gelu_, act);
  if (save) saved.pre_activation = pre;
  result.out = take_out(fc2_.forward(act, save), saved.fc2);
  return result;
}

Tensor VisionMlp::backward(Saved&& saved, const Tensor& dy) const {
  Saved kept = std::move(saved);
  VEOMNI_CHECK(kept.pre_activation.defined(), "vision MLP backward without a saved forward");
  Tensor dact = fc2_.backward(std::move(kept.fc2), dy);
  Tensor dpre = empty_like(dact, dact.shape());
  ops::gelu_backward(dact, kept.pre_activation, gelu_, dpre);
  kept.pre_activation = Tensor();
  return fc1_.backward(std::move(kept.fc1), dpre);
}

}  // namespace veomni
