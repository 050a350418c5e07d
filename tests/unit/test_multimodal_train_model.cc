// The trainer's multimodal model seams: model-type detection, VeOmni's tower roles and freezing by name, and the
// toy and VeOmni peer configs loading as thinker configs.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "train/train_config.h"
#include "train/train_model.h"

namespace veomni {
namespace {

const std::string kSourceRoot = VEOMNI_SOURCE_DIR;
const std::string kTrainFixtures = VEOMNI_FIXTURES_DIR;

TEST(MultimodalTrainModel, DetectsTheModelTypeOfConfigJson) {
  EXPECT_TRUE(is_multimodal_config(kSourceRoot + "/configs/model_configs/qwen3_omni_moe_toy"));
  EXPECT_TRUE(is_multimodal_config(kSourceRoot + "/configs/model_configs/qwen3_vl_toy/config.json"));
  EXPECT_FALSE(is_multimodal_config(kSourceRoot + "/configs/model_configs/qwen3_moe_toy"));
  EXPECT_THROW(is_multimodal_config(kSourceRoot + "/configs/model_configs/no_such_model"), InputError);
}

TEST(MultimodalTrainModel, RolesFollowVeOmnisNameRule) {
  EXPECT_EQ(param_role("model.visual.blocks.0.attn.qkv.weight"), ParamRole::Vision);
  EXPECT_EQ(param_role("thinker.visual.merger_list.1.mlp.0.bias"), ParamRole::Vision);
  EXPECT_EQ(param_role("thinker.audio_tower.layers.0.fc1.weight"), ParamRole::Audio);
  EXPECT_EQ(param_role("thinker.model.layers.0.mlp.gate.weight"), ParamRole::LanguageModel);
  EXPECT_EQ(param_role("lm_head.weight"), ParamRole::LanguageModel);
}

TEST(MultimodalTrainModel, FreezingKeepsTheOmniMergerAndAudioProj1Trainable) {
  const std::string omni = "qwen3_omni_moe", vl = "qwen3_vl_moe";
  EXPECT_TRUE(param_frozen("thinker.visual.blocks.0.mlp.linear_fc1.weight", omni, true, false));
  EXPECT_TRUE(param_frozen("thinker.visual.merger_list.0.mlp.0.weight", omni, true, false));
  EXPECT_FALSE(param_frozen("thinker.visual.merger.mlp.0.weight", omni, true, false));
  EXPECT_TRUE(param_frozen("model.visual.merger.linear_fc1.weight", vl, true, false));
  EXPECT_FALSE(param_frozen("model.visual.merger.linear_fc1.weight", vl, false, true));
  EXPECT_TRUE(param_frozen("thinker.audio_tower.proj2.weight", omni, false, true));
  EXPECT_TRUE(param_frozen("thinker.audio_tower.conv2d1.weight", omni, false, true));
  EXPECT_FALSE(param_frozen("thinker.audio_tower.proj1.weight", omni, false, true));
  EXPECT_FALSE(param_frozen("thinker.audio_tower.proj2.weight", omni, true, false));
  EXPECT_FALSE(param_frozen("thinker.model.embed_tokens.weight", omni, true, true));
}

TEST(MultimodalTrainModel, PeerToyConfigsLoad) {
  const ThinkerConfig vl = load_thinker_config(kTrainFixtures + "/veomni_toy_configs/qwen3vl_toy");
  EXPECT_EQ(vl.model_type, "qwen3_vl");
  EXPECT_FALSE(vl.text.is_moe());
  const ThinkerConfig vl_moe = load_thinker_config(kTrainFixtures + "/veomni_toy_configs/qwen3vlmoe_toy");
  EXPECT_TRUE(vl_moe.text.is_moe());
  const ThinkerConfig omni = load_thinker_config(kTrainFixtures + "/veomni_toy_configs/qwen3omni_toy");
  EXPECT_TRUE(omni.has_audio);
  EXPECT_TRUE(omni.text.is_moe());
  EXPECT_EQ(omni.text_prefix, "thinker.model.");
}

TEST(MultimodalTrainModel, TowerLearningRatesAreValidated) {
  TrainConfig c;
  c.model.config_path = "configs/model_configs/qwen3_omni_moe_toy";
  c.data.train_path = "omni.h5";
  EXPECT_NO_THROW(validate_train_config(c));
  c.train.vit_lr = -1e-3;
  EXPECT_THROW(validate_train_config(c), InputError);
  c.train.vit_lr = 1e-3;
  c.train.audio_lr = -2;
  EXPECT_THROW(validate_train_config(c), InputError);
  c.train.audio_lr = 0;
  EXPECT_NO_THROW(validate_train_config(c));
}

}  // namespace
}  // namespace veomni
