// A model's parameters (names, shapes, expert flags) built from its config without allocating any value: what the
// checkpoint converters walk when they stream tensors from one format to another.
#pragma once
#include <memory>

#include "model/model_head.h"
#include "model/parallel_hooks.h"
#include "train/train_model.h"

namespace veomni {

struct ModelParamList {
  ModelParamList(const ModelConfig& config, ModelHead head) {
    ModelOptions options;
    options.hooks.params = &no_materialisation;
    model = std::make_unique<TrainModel>(config, options, head);
  }
  ModelParamList(const ThinkerConfig& config, ModelHead head) {
    ModelOptions options;
    options.hooks.params = &no_materialisation;
    model = std::make_unique<TrainModel>(config, options, false, head);
  }
  ParamStore& params() { return model->params(); }

  ParamHooks no_materialisation;
  std::unique_ptr<TrainModel> model;
};

}  // namespace veomni
