// The objective train.objective names, constructed for a run.
#include "train/objective.h"

#include "train/objective_sft.h"

namespace veomni {

std::unique_ptr<Objective> make_objective(const std::string& name, const ModelConfig& text_config) {
  check_objective_available(name);
  return std::make_unique<SftObjective>(text_config);
}

}  // namespace veomni
