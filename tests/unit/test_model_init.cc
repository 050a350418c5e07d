// Unit tests of parameter initialisation: HF scheme, determinism, and independence of the expert-parallel layout.
#include <gtest/gtest.h>

#include <cmath>

#include "model/causal_lm.h"
#include "model/init.h"
#include "test_model_util.h"

using namespace veomni;
using namespace veomni::test;

namespace {

// Expert parallelism as seen from one rank; the model only asks for the layout at construction.
class FixedExpertLayout final : public ExpertHooks {
 public:
  FixedExpertLayout(int64_t size, int64_t rank) : size_(size), rank_(rank) {}
  int64_t ep_size() const override { return size_; }
  int64_t ep_rank() const override { return rank_; }

 private:
  int64_t size_, rank_;
};

}  // namespace

TEST(ModelInit, DeterministicPerSeedWithHfScheme) {
  const ModelConfig config = tiny_moe_config(false);
  CausalLM a(config, ModelOptions{}), b(config, ModelOptions{}), c(config, ModelOptions{});
  a.init_weights(42);
  b.init_weights(42);
  c.init_weights(43);
  const auto va = values_of(a), vb = values_of(b), vc = values_of(c);
  EXPECT_EQ(va, vb);
  for (const auto& [name, values] : va) {
    if (name.find("norm.weight") != std::string::npos) {
      for (float v : values) ASSERT_EQ(v, 1.0f) << name;
      continue;
    }
    EXPECT_NE(values, vc.at(name)) << name << " must change with the seed";
  }
  // Different parameters draw from different streams.
  EXPECT_NE(va.at("model.layers.0.self_attn.k_proj.weight"), va.at("model.layers.0.self_attn.v_proj.weight"));
}

TEST(ModelInit, NormalDrawsHaveTheConfiguredStd) {
  std::vector<float> v(200000);
  fill_init_values("w", InitSpec{InitSpec::Kind::Normal, 0.02}, 7, 0, static_cast<int64_t>(v.size()), v.data());
  double sum = 0, sq = 0;
  for (float x : v) {
    sum += x;
    sq += static_cast<double>(x) * x;
  }
  const double mean = sum / static_cast<double>(v.size());
  EXPECT_NEAR(mean, 0.0, 3e-4);
  EXPECT_NEAR(std::sqrt(sq / static_cast<double>(v.size()) - mean * mean), 0.02, 3e-4);
}

TEST(ModelInit, AnySliceOfATensorMatchesTheWhole) {
  const InitSpec spec{InitSpec::Kind::Normal, 1.0};
  std::vector<float> whole(1000), part(300);
  fill_init_values("model.layers.0.mlp.experts.down_proj", spec, 5, 0, 1000, whole.data());
  fill_init_values("model.layers.0.mlp.experts.down_proj", spec, 5, 517, 300, part.data());
  for (size_t i = 0; i < part.size(); ++i) ASSERT_EQ(part[i], whole[517 + i]);
}

// An expert-parallel rank generates exactly its rows of the full expert tensors; everything else is replicated.
TEST(ModelInit, ExpertParallelRowsEqualTheFullTensorsRows) {
  const ModelConfig config = tiny_moe_config(false);
  CausalLM full(config, ModelOptions{});
  full.init_weights(8);
  FixedExpertLayout layout(2, 1);
  ModelOptions options;
  options.hooks.experts = &layout;
  CausalLM rank1(config, options);
  rank1.init_weights(8);
  int experts_seen = 0;
  for (const auto& p : rank1.params().all()) {
    const Parameter& whole = full.params().at(p->name);
    if (!p->is_expert) {
      EXPECT_EQ(p->value.to_float_vector(), whole.value.to_float_vector()) << p->name;
      continue;
    }
    ++experts_seen;
    EXPECT_EQ(p->local_begin, 2);
    EXPECT_EQ(p->local_end, 4);
    EXPECT_EQ(p->value.dim(0), 2);
    EXPECT_EQ(p->value.to_float_vector(), whole.value.slice(2, 4).to_float_vector()) << p->name;
  }
  EXPECT_EQ(experts_seen, 4);  // two sparse layers, gate_up and down each

  FixedExpertLayout uneven(3, 0);
  options.hooks.experts = &uneven;
  EXPECT_THROW(CausalLM(config, options), InputError);
}
