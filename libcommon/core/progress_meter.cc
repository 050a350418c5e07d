// ProgressMeter: the throttle, the rate and the time left of a progress line.
#include "core/progress_meter.h"

namespace veomni {

ProgressMeter::ProgressMeter(double total, Clock::duration period, Clock::time_point start)
    : total_(total), period_(period), start_(start), last_(start) {}

bool ProgressMeter::due(double done, Clock::time_point now) {
  if (now - last_ < period_) return false;
  last_ = now;
  done_ = done;
  seconds_ = std::chrono::duration<double>(now - start_).count();
  return true;
}

double ProgressMeter::rate() const { return seconds_ > 0.0 ? done_ / seconds_ : 0.0; }

double ProgressMeter::fraction() const { return total_ > 0.0 ? done_ / total_ : 0.0; }

double ProgressMeter::seconds_left() const {
  if (total_ <= 0.0 || done_ <= 0.0) return -1.0;
  return (total_ - done_) * seconds_ / done_;
}

}  // namespace veomni
