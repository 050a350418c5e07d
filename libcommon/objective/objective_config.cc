// Validation of the objectives' loss hyperparameters: every message names the key, the value and what is allowed.
#include "objective/objective_config.h"

#include <cmath>
#include <initializer_list>

#include "core/error.h"

namespace veomni::objective {
namespace {

void require(bool ok, std::string_view section, std::string_view key, const std::string& why) {
  VEOMNI_INPUT_CHECK(ok, "{}.{}: {}", section, key, why);
}

void require_choice(const std::string& value, std::initializer_list<std::string_view> choices, std::string_view section,
                    std::string_view key) {
  for (std::string_view c : choices)
    if (value == c) return;
  std::string list;
  for (std::string_view c : choices) list += (list.empty() ? "" : " | ") + std::string(c);
  require(false, section, key, fmt::format("'{}' is not one of {}", value, list));
}

void require_positive(double v, std::string_view section, std::string_view key) {
  require(std::isfinite(v) && v > 0.0, section, key, fmt::format("must be a positive number, got {}", v));
}

void require_token_mean(const std::string& mode, std::string_view section) {
  require(
      mode == "token-mean", section, "loss_agg_mode",
      fmt::format("'{}' is not supported; only token-mean (the mean over the global batch's response tokens)", mode));
}

}  // namespace

void DpoConfig::validate(std::string_view section) const {
  require_positive(beta, section, "beta");
  require(std::isfinite(label_smoothing) && label_smoothing >= 0.0 && label_smoothing <= 0.5, section,
          "label_smoothing", fmt::format("must lie in [0, 0.5], got {}", label_smoothing));
  require_choice(loss_type, {"sigmoid", "ipo"}, section, "loss_type");
  require(loss_type == "sigmoid" || label_smoothing == 0.0, section, "label_smoothing",
          fmt::format("applies to loss_type sigmoid only, but loss_type is {} (set label_smoothing to 0)", loss_type));
  require_choice(refer_model_precision, {"float32", "bfloat16"}, section, "refer_model_precision");
}

void PpoActorConfig::validate(std::string_view section) const {
  require_positive(clip_ratio, section, "clip_ratio");
  if (clip_ratio_low != -1) require_positive(clip_ratio_low, section, "clip_ratio_low");
  if (clip_ratio_high != -1) require_positive(clip_ratio_high, section, "clip_ratio_high");
  require(low() < 1.0, section, clip_ratio_low != -1 ? "clip_ratio_low" : "clip_ratio",
          fmt::format("the lower clip bound 1 - {} must stay above 0", low()));
  require(std::isfinite(clip_ratio_c) && clip_ratio_c > 1.0, section, "clip_ratio_c",
          fmt::format("the dual-clip bound must be greater than 1, got {}", clip_ratio_c));
  require(std::isfinite(entropy_coeff), section, "entropy_coeff", fmt::format("must be finite, got {}", entropy_coeff));
  require(std::isfinite(kl_loss_coef) && kl_loss_coef >= 0.0, section, "kl_loss_coef",
          fmt::format("must be a non-negative number, got {}", kl_loss_coef));
  require_choice(kl_loss_type, {"kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"}, section, "kl_loss_type");
  require_token_mean(loss_agg_mode, section);
}

void ValueConfig::validate(std::string_view section) const {
  require_positive(cliprange_value, section, "cliprange_value");
  require_token_mean(loss_agg_mode, section);
}

}  // namespace veomni::objective
