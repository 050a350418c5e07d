// The value head: final norm + score [1, hidden] (+ a bias [1]) giving one value per token, for reward models
// (HF ...ForSequenceClassification: `score` without bias, read at a sequence's last token) and value models
// (HF ...ForTokenClassification: `score` with a bias).
#pragma once
#include <string>

#include "core/tensor.h"
#include "model/heads/head_base.h"
#include "model/model_config.h"

namespace veomni {

class ValueHead : public HeadBase {
 public:
  // Registers name_prefix + "weight" [1, hidden] (and name_prefix + "bias" [1] when bias) in the site's head group.
  ValueHead(const HeadSite& site, const ModelConfig& config, bool bias, const std::string& name_prefix = "score.");

  struct Saved {
    NormSaved norm;
    Tensor normed;  // [S, hidden] compute dtype
  };
  struct Output {
    Tensor values;  // f32 [S], on the body's device
    Saved saved;    // empty when forward ran with save = false
  };
  Output forward(const Tensor& hidden, bool save);
  // dvalues f32 [S] (any device). Returns d(hidden); accumulates score's and model.norm's gradients.
  Tensor backward(Saved saved, const Tensor& dvalues);

  Parameter& weight() { return *weight_; }
  Parameter* bias() { return bias_; }

 private:
  Parameter* weight_;
  Parameter* bias_ = nullptr;
};

}  // namespace veomni
