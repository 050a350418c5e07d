// Duration/count formatting and the ETA clock.
#include "train/progress.h"

#include <spdlog/fmt/fmt.h>

#include <cmath>

namespace veomni {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--:--";
  auto total = static_cast<int64_t>(std::llround(seconds));
  const int64_t days = total / 86400;
  total %= 86400;
  const std::string hms = fmt::format("{:02d}:{:02d}:{:02d}", total / 3600, (total / 60) % 60, total % 60);
  return days > 0 ? fmt::format("{}d {}", days, hms) : hms;
}

std::string format_count(double value) {
  const double a = std::fabs(value);
  if (a >= 1e9) return fmt::format("{:.2f}G", value / 1e9);
  if (a >= 1e6) return fmt::format("{:.2f}M", value / 1e6);
  if (a >= 1e3) return fmt::format("{:.1f}k", value / 1e3);
  return fmt::format("{:.0f}", value);
}

ProgressClock::ProgressClock(int64_t first_step, int64_t total_steps)
    : start_(Clock::now()), last_(start_), first_step_(first_step), total_steps_(total_steps),
      current_step_(first_step) {}

double ProgressClock::finish_step(int64_t step) {
  const auto now = Clock::now();
  const double dt = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  current_step_ = step;
  ++done_;
  return dt;
}

double ProgressClock::elapsed_seconds() const { return std::chrono::duration<double>(last_ - start_).count(); }

double ProgressClock::eta_seconds() const {
  if (done_ == 0) return -1;
  const double per_step = elapsed_seconds() / static_cast<double>(done_);
  return per_step * static_cast<double>(total_steps_ - current_step_);
}

}  // namespace veomni
