// model.lora_config: the adapters' scale, PEFT's module-name matching (experts' fused tensors included) and the
// checks of the section.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/lora_config.h"
#include "train/train_config.h"

using namespace veomni;

namespace {

LoraConfig rank(int64_t r) {
  LoraConfig c;
  c.rank = r;
  return c;
}

std::string validation_error(const LoraConfig& c) {
  try {
    c.validate();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(LoraConfig, ScaleIsAlphaOverRankOrOverItsRootWithRslora) {
  LoraConfig c = rank(16);
  c.alpha = 32;
  EXPECT_DOUBLE_EQ(c.scale(), 2.0);
  c.use_rslora = true;
  EXPECT_DOUBLE_EQ(c.scale(), 8.0);
}

TEST(LoraConfig, OffUnlessRankIsPositive) {
  EXPECT_FALSE(LoraConfig().enabled());
  EXPECT_FALSE(LoraConfig().targets("model.layers.0.self_attn.q_proj"));
  EXPECT_TRUE(rank(4).enabled());
}

TEST(LoraConfig, EntriesMatchTheWholeNameOrItsLastComponents) {
  LoraConfig c = rank(8);
  c.lora_modules = {"q_proj", "mlp.down_proj", "model.layers.1.self_attn.o_proj"};
  EXPECT_TRUE(c.targets("model.layers.0.self_attn.q_proj"));
  EXPECT_TRUE(c.targets("thinker.audio_tower.layers.2.self_attn.q_proj"));
  EXPECT_TRUE(c.targets("model.layers.5.mlp.down_proj"));
  EXPECT_TRUE(c.targets("model.layers.1.self_attn.o_proj"));
  EXPECT_FALSE(c.targets("model.layers.0.self_attn.o_proj"));
  EXPECT_FALSE(c.targets("model.layers.0.self_attn.xq_proj"));  // a component, not a substring
  EXPECT_FALSE(c.targets("model.layers.0.mlp.up_proj"));
}

TEST(LoraConfig, ExpertsFusedGateUpNeedsBothGateAndUp) {
  LoraConfig c = rank(8);
  EXPECT_TRUE(c.targets("model.layers.0.mlp.experts.gate_up_proj"));
  EXPECT_TRUE(c.targets("model.layers.0.mlp.experts.down_proj"));
  c.lora_modules = {"down_proj"};
  EXPECT_FALSE(c.targets("model.layers.0.mlp.experts.gate_up_proj"));
  c.lora_modules = {"gate_proj"};
  try {
    c.targets("model.layers.0.mlp.experts.gate_up_proj");
    FAIL() << "gate_proj without up_proj was accepted for the fused experts tensor";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("but not up_proj"), std::string::npos) << e.what();
  }
  c.lora_modules = {"gate_up_proj"};
  EXPECT_TRUE(c.targets("model.layers.0.mlp.experts.gate_up_proj"));
}

TEST(LoraConfig, ExcludeModulesIsAFullMatchRegex) {
  LoraConfig c = rank(8);
  c.exclude_modules = ".*(visual|audio_tower).*";
  EXPECT_FALSE(c.targets("thinker.audio_tower.layers.0.self_attn.q_proj"));
  EXPECT_TRUE(c.targets("thinker.model.layers.0.self_attn.q_proj"));
  c.exclude_modules = "layers\\.0\\.";  // no full match of any name: excludes nothing
  EXPECT_TRUE(c.targets("model.layers.0.self_attn.q_proj"));
}

TEST(LoraConfig, UnmatchedEntriesNameTypos) {
  LoraConfig c = rank(8);
  c.lora_modules = {"q_proj", "gate_proj", "qproj"};
  const std::vector<std::string> modules = {"model.layers.0.self_attn.q_proj", "model.layers.0.mlp.experts.gate_up_proj"};
  EXPECT_EQ(c.unmatched_entries(modules), std::vector<std::string>{"qproj"});
}

TEST(LoraConfig, ValidationNamesTheKey) {
  EXPECT_EQ(validation_error(LoraConfig()), "");
  EXPECT_EQ(validation_error(rank(8)), "");
  EXPECT_NE(validation_error(rank(-1)).find("model.lora_config.rank must be positive"), std::string::npos);
  LoraConfig forgot_rank;
  forgot_rank.share_expert_lora = true;
  EXPECT_NE(validation_error(forgot_rank).find("model.lora_config.rank is 0"), std::string::npos);
  LoraConfig bad_alpha = rank(8);
  bad_alpha.alpha = 0;
  EXPECT_NE(validation_error(bad_alpha).find("model.lora_config.alpha"), std::string::npos);
  LoraConfig empty = rank(8);
  empty.lora_modules.clear();
  EXPECT_NE(validation_error(empty).find("lora_modules is empty"), std::string::npos);
  LoraConfig blank = rank(8);
  blank.lora_modules = {"q_proj", ""};
  EXPECT_NE(validation_error(blank).find("no module name"), std::string::npos);
  LoraConfig bad_regex = rank(8);
  bad_regex.exclude_modules = "(visual";
  EXPECT_NE(validation_error(bad_regex).find("exclude_modules"), std::string::npos);
}

TEST(LoraConfig, KeysReadFromYamlWithVeOmniNames) {
  const TrainConfig c = train_config_from_yaml(
      "model:\n  config_path: x\n  lora_config:\n    rank: 16\n    alpha: 32\n    use_rslora: true\n"
      "    lora_modules: [q_proj, v_proj]\n    share_expert_lora: true\n",
      "inline");
  EXPECT_EQ(c.model.lora_config.rank, 16);
  EXPECT_DOUBLE_EQ(c.model.lora_config.alpha, 32);
  EXPECT_TRUE(c.model.lora_config.use_rslora);
  EXPECT_EQ(c.model.lora_config.lora_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_TRUE(c.model.lora_config.share_expert_lora);
}

TEST(LoraConfig, FusedGateUpThroughGateAndUpTakesBothRanksAsPeftDoes) {
  LoraConfig c = rank(4);
  c.alpha = 8;
  const std::string fused = "model.layers.0.mlp.experts.gate_up_proj";
  EXPECT_EQ(c.rank_of(fused), 8);
  EXPECT_DOUBLE_EQ(c.scale_of(fused), 2.0);  // 2 alpha / 2r
  EXPECT_EQ(c.rank_of("model.layers.0.mlp.experts.down_proj"), 4);
  EXPECT_EQ(c.rank_of("model.layers.0.self_attn.q_proj"), 4);
  c.use_rslora = true;
  EXPECT_DOUBLE_EQ(c.scale_of(fused), 16.0 / std::sqrt(8.0));
  EXPECT_DOUBLE_EQ(c.scale_of("model.layers.0.mlp.experts.down_proj"), 4.0);
  c.lora_modules = {"gate_up_proj"};  // named itself: one adapter of rank r
  EXPECT_EQ(c.rank_of(fused), 4);
}
