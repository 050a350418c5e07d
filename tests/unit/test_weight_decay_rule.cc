// Unit tests of train.optimizer.no_decay_modules / no_decay_params: which parameters AdamW decays.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "optim/adamw.h"
#include "optim/weight_decay_rule.h"

using namespace veomni;

namespace {

const std::vector<std::string> kQwen3MoeNames = {
    "model.embed_tokens.weight",
    "model.layers.0.input_layernorm.weight",
    "model.layers.0.self_attn.q_proj.weight",
    "model.layers.0.self_attn.q_norm.weight",
    "model.layers.0.mlp.gate.weight",
    "model.layers.0.mlp.experts.gate_up_proj",
    "model.norm.weight",
    "lm_head.weight",
};

std::vector<std::string> decayed(const WeightDecayRule& rule, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const std::string& name : names)
    if (rule.decays(name)) out.push_back(name);
  return out;
}

}  // namespace

TEST(WeightDecayRule, DefaultLeavesNormsAndBiasesUndecayed) {
  const WeightDecayRule rule;
  EXPECT_EQ(decayed(rule, kQwen3MoeNames),
            (std::vector<std::string>{"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                                      "model.layers.0.mlp.gate.weight", "model.layers.0.mlp.experts.gate_up_proj",
                                      "lm_head.weight"}));
  EXPECT_FALSE(rule.decays("visual.blocks.0.attn.qkv.bias"));
  EXPECT_TRUE(rule.decays("visual.blocks.0.attn.qkv.weight"));
}

TEST(WeightDecayRule, ModuleTypesFromHfNames) {
  EXPECT_EQ(module_type_of("model.layers.3.post_attention_layernorm.weight"), "RMSNorm");
  EXPECT_EQ(module_type_of("model.layers.3.self_attn.k_norm.weight"), "RMSNorm");
  EXPECT_EQ(module_type_of("model.language_model.norm.weight"), "RMSNorm");
  EXPECT_EQ(module_type_of("visual.blocks.0.norm1.bias"), "LayerNorm");
  EXPECT_EQ(module_type_of("thinker.audio_tower.ln_post.weight"), "LayerNorm");
  EXPECT_EQ(module_type_of("model.embed_tokens.weight"), "Embedding");
  EXPECT_EQ(module_type_of("visual.pos_embed.weight"), "Embedding");
  EXPECT_EQ(module_type_of("visual.patch_embed.proj.weight"), "Conv3d");
  EXPECT_EQ(module_type_of("audio_tower.conv2d1.weight"), "Conv2d");
  EXPECT_EQ(module_type_of("model.layers.0.mlp.experts.down_proj"), "Experts");
  EXPECT_EQ(module_type_of("model.layers.0.self_attn.q_proj.lora_A.weight"), "Linear");
  EXPECT_EQ(module_type_of("lm_head.weight"), "Linear");
}

TEST(WeightDecayRule, ModulesMatchTheTypeWithOrWithoutTheModelPrefix) {
  for (const char* entry : {"RMSNorm", "Qwen3RMSNorm", "Qwen3MoeRMSNorm"}) {
    const WeightDecayRule rule{{entry}, {}};
    EXPECT_EQ(decayed(rule, kQwen3MoeNames),
              (std::vector<std::string>{"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                                        "model.layers.0.mlp.gate.weight", "model.layers.0.mlp.experts.gate_up_proj",
                                        "lm_head.weight"}))
        << entry;
  }
  const WeightDecayRule embedding_and_linear{{"Embedding", "Linear"}, {}};
  EXPECT_EQ(decayed(embedding_and_linear, kQwen3MoeNames),
            (std::vector<std::string>{"model.layers.0.input_layernorm.weight", "model.layers.0.self_attn.q_norm.weight",
                                      "model.layers.0.mlp.experts.gate_up_proj", "model.norm.weight"}));
  // "Norm" is no module type: it selects nothing (and check_matches refuses it).
  EXPECT_EQ(decayed(WeightDecayRule{{"Norm"}, {}}, kQwen3MoeNames), kQwen3MoeNames);
}

TEST(WeightDecayRule, ParamsAreCaseInsensitiveSubstrings) {
  const WeightDecayRule rule{{}, {"EMBED_tokens", "experts"}};
  EXPECT_EQ(decayed(rule, kQwen3MoeNames),
            (std::vector<std::string>{"model.layers.0.input_layernorm.weight", "model.layers.0.self_attn.q_proj.weight",
                                      "model.layers.0.self_attn.q_norm.weight", "model.layers.0.mlp.gate.weight",
                                      "model.norm.weight", "lm_head.weight"}));
  // [] for both decays everything (VeOmni's defaults).
  EXPECT_EQ(decayed(WeightDecayRule{{}, {}}, kQwen3MoeNames), kQwen3MoeNames);
}

TEST(WeightDecayRule, AnEntryThatMatchesNothingIsAnInputErrorNamingTheKey) {
  WeightDecayRule{{"Qwen3RMSNorm"}, {"lm_head"}}.check_matches(kQwen3MoeNames);
  try {
    WeightDecayRule{{}, {"bias"}}.check_matches(kQwen3MoeNames);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("train.optimizer.no_decay_params: 'bias'"), std::string::npos) << e.what();
  }
  try {
    WeightDecayRule{{"LayerNorm"}, {}}.check_matches(kQwen3MoeNames);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("train.optimizer.no_decay_modules: 'LayerNorm'"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("RMSNorm"), std::string::npos) << e.what();
  }
}

TEST(WeightDecayRule, AdamWDecaysOnlyTheSlotsTheRuleSelects) {
  AdamWOptions options;
  options.lr = 0.1;
  options.weight_decay = 0.5;
  options.decay_rule = WeightDecayRule{{"RMSNorm"}, {}};
  AdamW adamw(options);
  std::vector<Tensor> grads;
  grads.reserve(2);
  for (const char* name : {"model.norm.weight", "lm_head.weight"}) {
    grads.push_back(Tensor::zeros({2}, DType::F32, Device::cpu()));
    Tensor master = Tensor::zeros({2}, DType::F32, Device::cpu());
    master.data<float>()[0] = master.data<float>()[1] = 1.0f;
    adamw.add_slot(name, master, &grads.back());
  }
  adamw.step(options.lr);
  // Zero gradients: only decay moves a weight, by lr * weight_decay.
  EXPECT_FLOAT_EQ(adamw.slots()[0].master.data<float>()[0], 1.0f);
  EXPECT_FLOAT_EQ(adamw.slots()[1].master.data<float>()[0], 1.0f - 0.1f * 0.5f);
}
