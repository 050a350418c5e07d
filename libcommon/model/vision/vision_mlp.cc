// Vision MLP forward and backward.
#include "model/vision/vision_mlp.h"

#include "model/layers/common.h"

namespace veomni {

Tensor VisionMlp::forward(const Tensor& x, bool save) {
  Tensor pre = fc1_.forward(x, save);
  Tensor act = empty_like(pre, pre.shape());
  ops::gelu_forward(pre, gelu_, act);
  if (save) pre_activation_ = pre;
  return fc2_.forward(act, save);
}

Tensor VisionMlp::backward(const Tensor& dy) {
  VEOMNI_CHECK(pre_activation_.defined(), "vision MLP backward without a saved forward");
  Tensor dact = fc2_.backward(dy);
  Tensor dpre = empty_like(dact, dact.shape());
  ops::gelu_backward(dact, pre_activation_, gelu_, dpre);
  pre_activation_ = Tensor();
  return fc1_.backward(dpre);
}

void VisionMlp::release() {
  pre_activation_ = Tensor();
  fc1_.release();
  fc2_.release();
}

}  // namespace veomni
