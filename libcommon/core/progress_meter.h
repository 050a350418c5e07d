// Progress of long work in some unit (bytes, samples, records): when a log line is due, the rate and the time left.
#pragma once
#include <chrono>

namespace veomni {

// Work of `total` units (0 or less: unknown) started at construction; due() says when a progress line is due, at most
// once a `period`, the first a period after the start.
class ProgressMeter {
 public:
  using Clock = std::chrono::steady_clock;

  ProgressMeter(double total, Clock::duration period, Clock::time_point start = Clock::now());

  // Whether a line is due with `done` units done at `now`; when it is, the getters below describe that moment.
  bool due(double done, Clock::time_point now = Clock::now());

  double done() const { return done_; }
  double total() const { return total_; }
  double seconds() const { return seconds_; }
  // Units a second since the start (0 before any time has passed).
  double rate() const;
  // Share of the total done (0 when the total is unknown).
  double fraction() const;
  // Seconds left at the rate so far; negative when unknown (no total, or nothing done yet).
  double seconds_left() const;

 private:
  double total_;
  Clock::duration period_;
  Clock::time_point start_, last_;
  double done_ = 0.0;
  double seconds_ = 0.0;
};

}  // namespace veomni
