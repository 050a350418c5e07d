// Warmup + decay schedule; the formulas follow VeOmni's build_lr_scheduler.
#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace veomni {

LrSchedule::LrSchedule(const LrScheduleOptions& options) : options_(options) {
  VEOMNI_INPUT_CHECK(options.decay_style == "constant" || options.decay_style == "linear" ||
                         options.decay_style == "cosine",
                     "train.optimizer.lr_decay_style: '{}' is not one of constant, linear, cosine", options.decay_style);
  VEOMNI_INPUT_CHECK(options.warmup_ratio >= 0.0 && options.warmup_ratio <= 1.0,
                     "train.optimizer.lr_warmup_ratio: {} is outside [0, 1]", options.warmup_ratio);
  VEOMNI_INPUT_CHECK(options.total_steps > 0, "the run has no optimizer steps (total steps {})", options.total_steps);
  warmup_steps_ = static_cast<int64_t>(std::ceil(options.warmup_ratio * static_cast<double>(options.total_steps)));
}

double LrSchedule::lr_at(int64_t step) const {
  const double peak = options_.lr;
  // Warmup reaches the peak at the end of warmup: step w-1 uses peak * w/w.
  if (step < warmup_steps_) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup_steps_);
  if (options_.decay_style == "constant") return peak;
  const int64_t decay_steps = std::max<int64_t>(1, options_.total_steps - warmup_steps_);
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup_steps_) / static_cast<double>(decay_steps));
  const double lr_min = options_.lr_min;
  if (options_.decay_style == "linear") return lr_min + (peak - lr_min) * (1.0 - progress);
  return lr_min + (peak - lr_min) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

}  // namespace veomni
