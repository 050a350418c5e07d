// train.objective's names and the ones available now.
#include "train/objective_names.h"

#include <algorithm>

#include "core/error.h"

namespace veomni {

const std::vector<std::string>& objective_names() {
  static const std::vector<std::string> names{"sft", "dpo", "reward", "value", "ppo_actor"};
  return names;
}

void check_objective_available(const std::string& name) {
  VEOMNI_INPUT_CHECK(std::find(objective_names().begin(), objective_names().end(), name) != objective_names().end(),
                     "train.objective must be one of sft, dpo, reward, value, ppo_actor, got '{}'", name);
}

}  // namespace veomni
