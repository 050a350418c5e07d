// The loss hyperparameters of the preference and RL objectives, with the names users know: VeOmni's `dpo_config` for
// DPO, verl's actor and critic keys for the PPO actor and the value model. Each validate() throws InputError naming
// `<section>.<key>`.
#pragma once
#include <string>
#include <string_view>

namespace veomni::objective {

// VeOmni's dpo_config (veomni/trainer/text_dpo_trainer.py: DPOConfig).
struct DpoConfig {
  double beta = 0.1;                  // temperature of the implicit reward; > 0
  double label_smoothing = 0.0;       // in [0, 0.5]; sigmoid loss only (conservative DPO)
  std::string loss_type = "sigmoid";  // sigmoid | ipo
  bool reference_free = false;        // the loss ignores the reference log-probs (the rewards still use them)
  std::string refer_model_precision = "bfloat16";  // float32 | bfloat16: the frozen reference model's dtype

  bool operator==(const DpoConfig&) const = default;
  void validate(std::string_view section = "dpo_config") const;
};

// verl's actor loss keys (verl/trainer/config/actor/actor.yaml), vanilla policy loss, token-mean aggregation. verl's
// `kl_coef` is another knob (the KL penalty folded into the rewards by the controller), so the KL *loss* here keeps
// verl's actor names: use_kl_loss, kl_loss_coef, kl_loss_type.
struct PpoActorConfig {
  double clip_ratio = 0.2;                // PPO's epsilon
  double clip_ratio_low = -1;             // lower epsilon; -1 (unset): clip_ratio
  double clip_ratio_high = -1;            // upper epsilon; -1 (unset): clip_ratio
  double clip_ratio_c = 3.0;              // dual-clip bound for negative advantages; > 1
  double entropy_coeff = 0.0;             // loss -= entropy_coeff * token-mean entropy
  bool use_kl_loss = false;               // loss += kl_loss_coef * token-mean KL(policy || reference)
  double kl_loss_coef = 0.001;
  std::string kl_loss_type = "low_var_kl";   // kl (k1) | abs | mse (k2) | low_var_kl (k3)
  std::string loss_agg_mode = "token-mean";  // the only mode: the token mean over the global batch

  double low() const { return clip_ratio_low == -1 ? clip_ratio : clip_ratio_low; }
  double high() const { return clip_ratio_high == -1 ? clip_ratio : clip_ratio_high; }
  bool operator==(const PpoActorConfig&) const = default;
  void validate(std::string_view section = "actor") const;
};

// verl's critic keys (verl/trainer/config/critic/critic.yaml): clipped value loss, token-mean aggregation.
struct ValueConfig {
  double cliprange_value = 0.5;  // new values stay within old_values +- cliprange_value
  std::string loss_agg_mode = "token-mean";

  bool operator==(const ValueConfig&) const = default;
  void validate(std::string_view section = "critic") const;
};

}  // namespace veomni::objective
