// The names train.objective accepts, and which of them this version trains (config validation, no model needed).
#pragma once
#include <string>
#include <vector>

namespace veomni {

// sft, dpo, reward, value, ppo_actor (the key's YAML choices).
const std::vector<std::string>& objective_names();
// A name this version does not train yet is an InputError naming train.objective. Names that are not objectives at
// all are refused by the key's choices first.
void check_objective_available(const std::string& name);

}  // namespace veomni
