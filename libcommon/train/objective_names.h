// The names train.objective accepts (config validation, no model needed).
#pragma once
#include <string>
#include <vector>

namespace veomni {

// sft, dpo, reward, value, ppo_actor (the key's YAML choices).
const std::vector<std::string>& objective_names();
// A name that is not an objective is an InputError naming train.objective (the key's choices refuse it first when
// the name comes from a config).
void check_objective_available(const std::string& name);

}  // namespace veomni
