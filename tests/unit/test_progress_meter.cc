// ProgressMeter: a line at most once a period, and the rate, share and time left at the moment it is due.
#include <gtest/gtest.h>

#include "core/progress_meter.h"

namespace veomni {
namespace {

using std::chrono::seconds;

TEST(ProgressMeter, IsDueOnceAPeriodWithTheRateAndTimeLeftOfThatMoment) {
  const ProgressMeter::Clock::time_point start{};
  ProgressMeter meter(100.0, seconds(2), start);
  EXPECT_FALSE(meter.due(10.0, start + seconds(1)));
  ASSERT_TRUE(meter.due(20.0, start + seconds(2)));
  EXPECT_DOUBLE_EQ(meter.done(), 20.0);
  EXPECT_DOUBLE_EQ(meter.seconds(), 2.0);
  EXPECT_DOUBLE_EQ(meter.rate(), 10.0);
  EXPECT_DOUBLE_EQ(meter.fraction(), 0.2);
  EXPECT_DOUBLE_EQ(meter.seconds_left(), 8.0);
  EXPECT_FALSE(meter.due(30.0, start + seconds(3)));  // one period after the last line, not after the start
  EXPECT_DOUBLE_EQ(meter.done(), 20.0);
  ASSERT_TRUE(meter.due(50.0, start + seconds(4)));
  EXPECT_DOUBLE_EQ(meter.seconds_left(), 4.0);
}

TEST(ProgressMeter, UnknownTotalsAndNothingDoneHaveNoTimeLeft) {
  const ProgressMeter::Clock::time_point start{};
  ProgressMeter unknown(0.0, seconds(1), start);
  ASSERT_TRUE(unknown.due(5.0, start + seconds(1)));
  EXPECT_DOUBLE_EQ(unknown.fraction(), 0.0);
  EXPECT_LT(unknown.seconds_left(), 0.0);
  EXPECT_DOUBLE_EQ(unknown.rate(), 5.0);
  ProgressMeter idle(10.0, seconds(1), start);
  ASSERT_TRUE(idle.due(0.0, start + seconds(1)));
  EXPECT_LT(idle.seconds_left(), 0.0);
}

}  // namespace
}  // namespace veomni
