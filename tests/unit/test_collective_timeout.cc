// The collective timeout: the configured value, the environment override and its validation, and how ranks are named.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/error.h"
#include "dist/collective_timeout.h"

namespace veomni {
namespace {

// Sets (or unsets, for nullptr) VEOMNI_COLLECTIVE_TIMEOUT for one test and restores the configured default.
class CollectiveTimeoutTest : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv(kCollectiveTimeoutEnv);
    set_collective_timeout(kDefaultCollectiveTimeoutSeconds);
  }
};

TEST_F(CollectiveTimeoutTest, DefaultIsTenMinutes) {
  unsetenv(kCollectiveTimeoutEnv);
  EXPECT_EQ(collective_timeout_seconds(), 600);
}

TEST_F(CollectiveTimeoutTest, ConfigSetsItAndTheEnvironmentOverrides) {
  unsetenv(kCollectiveTimeoutEnv);
  set_collective_timeout(30);
  EXPECT_EQ(collective_timeout_seconds(), 30);
  setenv(kCollectiveTimeoutEnv, "2.5", 1);
  EXPECT_EQ(collective_timeout_seconds(), 2.5);
  setenv(kCollectiveTimeoutEnv, "0", 1);
  EXPECT_EQ(collective_timeout_seconds(), 0);  // waits forever
}

TEST_F(CollectiveTimeoutTest, BadValuesAreInputErrorsNamingTheSource) {
  setenv(kCollectiveTimeoutEnv, "5m", 1);
  try {
    collective_timeout_seconds();
    FAIL() << "no error for 5m";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("VEOMNI_COLLECTIVE_TIMEOUT='5m'"), std::string::npos) << e.what();
  }
  setenv(kCollectiveTimeoutEnv, "-1", 1);
  EXPECT_THROW(collective_timeout_seconds(), InputError);
  unsetenv(kCollectiveTimeoutEnv);
  try {
    set_collective_timeout(-3);
    FAIL() << "no error for -3";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("train.accelerator.dist_timeout"), std::string::npos) << e.what();
  }
}

TEST_F(CollectiveTimeoutTest, RanksAreNamedWithHostAndPid) {
  set_world_peers({{"node-a", 100}, {"node-b", 200}});
  EXPECT_EQ(describe_world_rank(1), "rank 1 (host node-b, pid 200)");
  EXPECT_EQ(describe_world_rank(7), "rank 7");
  set_world_peers({});
}

}  // namespace
}  // namespace veomni
