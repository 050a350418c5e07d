// Tests of the VEOMNI_* environment overrides of config keys: values through the key table, switches, bad values
// named, the log lines, and the saved config recording the result.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.h"
#include "train/environment_overrides.h"
#include "train/train_config.h"

using namespace veomni;

namespace {

EnvironmentLookup fake_environment(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const char* name) -> const char* {
    auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace

TEST(EnvironmentOverrides, UnsetVariablesChangeNothing) {
  TrainConfig config;
  const TrainConfig before = config;
  EXPECT_TRUE(apply_environment_overrides(config, fake_environment({})).empty());
  EXPECT_TRUE(apply_environment_overrides(config, fake_environment({{"VEOMNI_ATTENTION_BACKEND", ""}})).empty());
  EXPECT_EQ(config, before);
}

TEST(EnvironmentOverrides, EachVariableSetsItsKey) {
  TrainConfig config;
  const auto log = apply_environment_overrides(
      config, fake_environment({{"VEOMNI_ATTENTION_BACKEND", "native"},
                                {"VEOMNI_GEMM_AUTOTUNE", "1"},
                                {"VEOMNI_GROUPED_GEMM", "loop"},
                                {"VEOMNI_DEBUG_CHECKS", "1"},
                                {"VEOMNI_PROFILE_OPS", "1"},
                                {"VEOMNI_PROFILE_OPS_OUT", "/tmp/ops"},
                                {"VEOMNI_PROFILE_OPS_SKIP_STEPS", "3"},
                                {"VEOMNI_COLLECTIVE_TIMEOUT", "42"}}));
  EXPECT_EQ(config.train.kernels.attention_backend, "native");
  EXPECT_TRUE(config.train.kernels.gemm_autotune);
  EXPECT_EQ(config.train.kernels.grouped_gemm, "loop");
  EXPECT_TRUE(config.train.kernels.debug_checks);
  EXPECT_TRUE(config.train.op_profile.enable);
  EXPECT_EQ(config.train.op_profile.out, "/tmp/ops");
  EXPECT_EQ(config.train.op_profile.skip_steps, 3);
  EXPECT_EQ(config.train.accelerator.dist_timeout, 42.0);
  ASSERT_EQ(log.size(), 8u);
  EXPECT_EQ(log[0], "VEOMNI_ATTENTION_BACKEND=native overrides train.kernels.attention_backend (was \"auto\")");
  EXPECT_EQ(log[1], "VEOMNI_GEMM_AUTOTUNE=1 overrides train.kernels.gemm_autotune (was false)");
}

TEST(EnvironmentOverrides, AValueEqualToTheConfigsIsNotLogged) {
  TrainConfig config;
  config.train.kernels.gemm_autotune = true;
  EXPECT_TRUE(apply_environment_overrides(config, fake_environment({{"VEOMNI_GEMM_AUTOTUNE", "1"}})).empty());
  EXPECT_TRUE(config.train.kernels.gemm_autotune);
  // 0 switches off what the config switched on.
  EXPECT_EQ(apply_environment_overrides(config, fake_environment({{"VEOMNI_GEMM_AUTOTUNE", "0"}})).size(), 1u);
  EXPECT_FALSE(config.train.kernels.gemm_autotune);
}

TEST(EnvironmentOverrides, BadValuesNameTheVariable) {
  const std::map<std::string, std::string> bad[] = {{{"VEOMNI_ATTENTION_BACKEND", "flash"}},
                                                    {{"VEOMNI_GEMM_AUTOTUNE", "yes"}},
                                                    {{"VEOMNI_PROFILE_OPS_SKIP_STEPS", "two"}},
                                                    {{"VEOMNI_COLLECTIVE_TIMEOUT", "soon"}}};
  for (const auto& variables : bad) {
    TrainConfig config;
    const std::string name = variables.begin()->first, value = variables.begin()->second;
    try {
      apply_environment_overrides(config, fake_environment(variables));
      FAIL() << name << "=" << value << " was accepted";
    } catch (const InputError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("environment variable " + name + "='" + value + "'"), std::string::npos) << message;
    }
  }
}

TEST(EnvironmentOverrides, EveryVariableNamesARealKeyOnce) {
  const auto& fields = train_config_schema().fields();
  std::map<std::string, int> seen;
  for (const EnvironmentOverride& o : environment_overrides()) {
    EXPECT_TRUE(train_config_schema().has_field(o.key)) << o.key;
    EXPECT_EQ(++seen[o.variable], 1) << o.variable;
  }
  EXPECT_FALSE(fields.empty());
}

TEST(EnvironmentOverrides, TheSavedConfigRecordsTheOverride) {
  TrainConfig config;
  apply_environment_overrides(config, fake_environment({{"VEOMNI_ATTENTION_BACKEND", "cudnn"}}));
  const std::string yaml = train_config_to_yaml(config);
  EXPECT_NE(yaml.find("attention_backend: \"cudnn\""), std::string::npos) << yaml;
  EXPECT_EQ(train_config_from_yaml(yaml, "saved").train.kernels.attention_backend, "cudnn");
}

TEST(KernelSettings, FollowTheConfig) {
  TrainConfig config;
  config.train.kernels.grouped_gemm = "loop";
  config.train.op_profile.enable = true;
  config.train.op_profile.out = "x";
  const KernelSettings k = kernel_settings_of(config);
  EXPECT_TRUE(k.grouped_gemm_loop);
  EXPECT_FALSE(k.debug_checks);  // off by default: the collator has checked every id on the host
  config.train.kernels.debug_checks = true;
  EXPECT_TRUE(kernel_settings_of(config).debug_checks);
  EXPECT_TRUE(k.profile_ops);
  EXPECT_EQ(k.profile_ops_out, "x");
  EXPECT_EQ(k.attention_backend, "auto");
  EXPECT_THROW(apply_kernel_settings({.attention_backend = "flash"}), InputError);
}
