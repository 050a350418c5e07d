// Vision MLP forward and backward.
#include "model/vision/vision_mlp.h"

#include "model/layers/common.h"

namespace veomni {

Tensor VisionMlp::forward(const Tensor& x, bool save) {
  Tensor pre = take_out(fc1_.forward(x, save), fc1_saved_);
  Tensor act = empty_like(pre, pre.shape());
  ops::gelu_forward(pre, gelu_, act);
  if (save) pre_activation_ = pre;
  return take_out(fc2_.forward(act, save), fc2_saved_);
}

Tensor VisionMlp::backward(const Tensor& dy) {
  VEOMNI_CHECK(pre_activation_.defined(), "vision MLP backward without a saved forward");
  Tensor dact = fc2_.backward(std::move(fc2_saved_), dy);
  Tensor dpre = empty_like(dact, dact.shape());
  ops::gelu_backward(dact, pre_activation_, gelu_, dpre);
  pre_activation_ = Tensor();
  return fc1_.backward(std::move(fc1_saved_), dpre);
}

void VisionMlp::release() {
  pre_activation_ = Tensor();
  fc1_saved_ = fc2_saved_ = {};
}

}  // namespace veomni
