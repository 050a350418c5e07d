// Patch merger forward and backward; the concatenation of merge windows is a reshape (patches come window-ordered).
#include "model/vision/vision_merger.h"

#include "model/layers/common.h"

namespace veomni {

namespace {

struct MergerNames {
  std::string norm, fc1, fc2;
};

MergerNames merger_names(VisionFlavor flavor, const std::string& name) {
  if (flavor == VisionFlavor::Qwen3Omni) return {name + ".ln_q", name + ".mlp.0", name + ".mlp.2"};
  return {name + ".norm", name + ".linear_fc1", name + ".linear_fc2"};
}

LayerNorm make_norm(ParamStore& store, const std::string& name, int64_t width, double eps) {
  Parameter* weight = store.add(name + ".weight", {width});
  Parameter* bias = store.add(name + ".bias", {width});
  return LayerNorm(weight, bias, eps);
}

VisionMlp make_mlp(ParamStore& store, const MergerNames& names, const VisionConfig& c) {
  const int64_t merged = c.merged_hidden_size();
  BiasedLinear fc1(store, names.fc1, merged, merged);
  BiasedLinear fc2(store, names.fc2, c.out_hidden_size, merged);
  return VisionMlp(fc1, fc2, ops::GeluKind::Erf);  // nn.GELU() whatever hidden_act says
}

}  // namespace

VisionMerger::VisionMerger(ParamStore& store, const VisionConfig& c, const std::string& name, bool post_shuffle)
    : hidden_(c.hidden_size),
      merged_(c.merged_hidden_size()),
      post_shuffle_(post_shuffle),
      norm_(make_norm(store, merger_names(c.flavor, name).norm, post_shuffle ? c.merged_hidden_size() : c.hidden_size,
                      c.layer_norm_eps)),
      mlp_(make_mlp(store, merger_names(c.flavor, name), c)) {}

VisionMerger::Output VisionMerger::forward(const Tensor& x, bool save) const {
  VEOMNI_CHECK(x.ndim() == 2 && x.dim(1) == hidden_ && x.numel() % merged_ == 0,
               "merger input {} is not whole merge windows of width {}", x.describe(), hidden_);
  const int64_t windows = x.numel() / merged_;
  Output result;
  Saved& saved = result.saved;
  Tensor normed = post_shuffle_ ? take_out(norm_.forward(x.view({windows, merged_}), save), saved.norm)
                                : take_out(norm_.forward(x, save), saved.norm).view({windows, merged_});
  result.out = take_out(mlp_.forward(normed, save), saved.mlp);
  return result;
}

Tensor VisionMerger::backward(Saved&& saved, const Tensor& dy) const {
  Saved kept = std::move(saved);
  Tensor dnormed = mlp_.backward(std::move(kept.mlp), dy);
  const int64_t patches = dnormed.numel() / hidden_;
  return post_shuffle_ ? norm_.backward(std::move(kept.norm), dnormed).view({patches, hidden_})
                       : norm_.backward(std::move(kept.norm), dnormed.view({patches, hidden_}));
}

}  // namespace veomni
