// Progress lines for long work: step/total, metrics, throughput and ETA.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace veomni {

// "01:02:03" (or "1d 02:03:04") for a duration in seconds; "--:--:--" when unknown.
std::string format_duration(double seconds);
// 12345 -> "12.3k", 1.5e6 -> "1.50M".
std::string format_count(double value);

// Tracks the average time per step since start (excluding the first `warmup` steps, which include setup costs) and
// estimates the remaining time.
class ProgressClock {
 public:
  ProgressClock(int64_t first_step, int64_t total_steps);
  // Call after finishing step `step` (1-based); returns the duration of that step in seconds.
  double finish_step(int64_t step);
  double eta_seconds() const;
  double elapsed_seconds() const;

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
  Clock::time_point last_;
  int64_t first_step_;
  int64_t total_steps_;
  int64_t done_ = 0;
  int64_t current_step_ = 0;
};

}  // namespace veomni
