// Unit tests of the learning-rate schedules against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"

using namespace veomni;

TEST(LrSchedule, WarmupThenCosineToMin) {
  LrScheduleOptions o;
  o.lr = 1.0;
  o.lr_min = 0.1;
  o.warmup_ratio = 0.2;
  o.decay_style = "cosine";
  o.total_steps = 10;
  LrSchedule s(o);
  EXPECT_EQ(s.warmup_steps(), 2);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.5);
  EXPECT_DOUBLE_EQ(s.lr_at(1), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(2), 1.0);
  EXPECT_NEAR(s.lr_at(6), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.5)), 1e-15);
  EXPECT_NEAR(s.lr_at(10), 0.1, 1e-15);
}

TEST(LrSchedule, LinearAndConstant) {
  LrScheduleOptions o;
  o.lr = 2.0;
  o.total_steps = 4;
  o.decay_style = "linear";
  LrSchedule lin(o);
  EXPECT_DOUBLE_EQ(lin.lr_at(0), 2.0);
  EXPECT_DOUBLE_EQ(lin.lr_at(2), 1.0);
  o.decay_style = "constant";
  EXPECT_DOUBLE_EQ(LrSchedule(o).lr_at(3), 2.0);
  o.decay_style = "exponential";
  EXPECT_THROW(LrSchedule{o}, InputError);
}

TEST(AdamW, NoDecayOnNormsAndBiases) {
  EXPECT_FALSE(parameter_uses_weight_decay("model.layers.0.input_layernorm.weight"));
  EXPECT_FALSE(parameter_uses_weight_decay("model.layers.0.self_attn.q_norm.weight"));
  EXPECT_FALSE(parameter_uses_weight_decay("model.norm.weight"));
  EXPECT_FALSE(parameter_uses_weight_decay("visual.blocks.0.attn.qkv.bias"));
  EXPECT_TRUE(parameter_uses_weight_decay("model.layers.0.mlp.experts.gate_up_proj"));
  EXPECT_TRUE(parameter_uses_weight_decay("lm_head.weight"));
}
