// The objective train.objective names, constructed for a run.
#include "train/objective.h"

#include "train/objective_preference.h"
#include "train/objective_rollout.h"
#include "train/objective_sft.h"

namespace veomni {

std::unique_ptr<Objective> make_objective(const ObjectiveSettings& settings, const ModelConfig& text_config,
                                          TrainModel* reference) {
  check_objective_available(settings.name);
  if (settings.name == "dpo") return std::make_unique<DpoObjective>(text_config, settings.dpo, reference);
  if (settings.name == "reward") return std::make_unique<RewardObjective>(text_config);
  if (settings.name == "value") return std::make_unique<ValueObjective>(text_config, settings.critic);
  if (settings.name == "ppo_actor") return std::make_unique<PpoActorObjective>(text_config, settings.actor);
  return std::make_unique<SftObjective>(text_config, settings.source_names);
}

}  // namespace veomni
