// Learning-rate schedules (VeOmni's): linear warmup from 0, then constant, linear or cosine decay to lr_min.
#pragma once
#include <cstdint>
#include <string>

namespace veomni {

struct LrScheduleOptions {
  double lr = 1e-4;
  double lr_min = 0.0;
  double warmup_ratio = 0.0;            // fraction of total steps spent warming up
  std::string decay_style = "constant"; // constant | linear | cosine
  int64_t total_steps = 1;
};

class LrSchedule {
 public:
  explicit LrSchedule(const LrScheduleOptions& options);
  // Learning rate used by optimizer step `step` (0-based: the first update uses lr_at(0)).
  double lr_at(int64_t step) const;
  int64_t warmup_steps() const { return warmup_steps_; }

 private:
  LrScheduleOptions options_;
  int64_t warmup_steps_ = 0;
};

}  // namespace veomni
