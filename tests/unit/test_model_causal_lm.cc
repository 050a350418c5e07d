// Unit tests of the Qwen3 / Qwen3-MoE causal LM: finite-difference gradients of every parameter group, packing,
// recomputation, parameter and sequence hooks, the load-balancing loss, passes as values and input validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "model/causal_lm.h"
#include "model/attention.h"
#include "model/init.h"
#include "test_model_util.h"
#include "tests/common/expect_error.h"

using namespace veomni;
using namespace veomni::test;

namespace {

double objective(CausalLM& model, const Batch& batch, double ce_scale, double aux_scale) {
  const ForwardStats stats = model.forward(batch, false).stats;
  return stats.ce_sum * ce_scale + stats.aux_loss * aux_scale;
}

// Indices worth probing in a gradient: its largest entry plus a few random ones.
std::vector<int64_t> probe_indices(const std::vector<float>& grad, Rng& rng, int random_count) {
  std::vector<int64_t> idx;
  int64_t largest = 0;
  for (size_t i = 0; i < grad.size(); ++i)
    if (std::fabs(grad[i]) > std::fabs(grad[static_cast<size_t>(largest)])) largest = static_cast<int64_t>(i);
  idx.push_back(largest);
  for (int k = 0; k < random_count; ++k) idx.push_back(static_cast<int64_t>(rng.uniform_int(grad.size())));
  return idx;
}

// Central difference of the objective along one entry of a parameter.
double central_difference(CausalLM& model, const Batch& batch, Parameter& p, int64_t i, double h, double ce_scale,
                          double aux_scale) {
  float* v = p.value.data<float>() + i;
  const float original = *v;
  *v = static_cast<float>(original + h);
  const double plus = objective(model, batch, ce_scale, aux_scale);
  *v = static_cast<float>(original - h);
  const double minus = objective(model, batch, ce_scale, aux_scale);
  *v = original;
  return (plus - minus) / (2 * h);
}

// Central differences on the f32 model against its analytic gradient, for a few entries of every parameter.
// Top-k routing is discontinuous where two experts tie: a step that flips a routing decision shows up as a
// difference that changes with the step size, and such an entry is skipped (rarely; counted and bounded).
void expect_gradients_match_finite_differences(ModelConfig config, float aux_scale) {
  config.initializer_range = 0.25;  // large enough weights that every path carries a measurable gradient
  CausalLM model(config, ModelOptions{});
  model.init_weights(11);
  const Batch batch = packed_batch({5, 4, 6}, config.vocab_size, 3, 1);
  const float ce_scale = 1.0f / static_cast<float>(batch.valid_tokens);
  model.params().zero_grads();
  model.backward(model.forward(batch, true), ce_scale, aux_scale);

  const double h = 3e-3;
  Rng rng(5);
  std::set<std::string> groups_checked;
  int probes = 0, kinks = 0;
  for (ParamGroup& group : model.params().groups()) {
    for (Parameter* p : group.params) {
      const std::vector<float> grad = p->grad.to_float_vector();
      double max_abs = 0;
      for (float g : grad) max_abs = std::max(max_abs, static_cast<double>(std::fabs(g)));
      EXPECT_GT(max_abs, 1e-4) << p->name << " has a vanishing gradient: the check would prove nothing";
      for (int64_t i : probe_indices(grad, rng, 3)) {
        ++probes;
        const double fd = central_difference(model, batch, *p, i, h, ce_scale, aux_scale);
        const double g = grad[static_cast<size_t>(i)];
        const double tolerance = 1e-4 + 1e-3 * std::fabs(fd);
        if (std::fabs(g - fd) <= tolerance) continue;
        const double fd_small = central_difference(model, batch, *p, i, h / 4, ce_scale, aux_scale);
        if (std::fabs(fd - fd_small) > 1e-2 + 0.05 * std::fabs(fd_small)) {
          ++kinks;
          continue;
        }
        EXPECT_NEAR(g, fd, tolerance) << p->name << "[" << i << "]";
      }
      groups_checked.insert(group.name);
    }
  }
  EXPECT_EQ(groups_checked.size(), model.params().groups().size());
  EXPECT_LE(kinks, 2) << "of " << probes << " probes, too many hit a routing flip";
}

}  // namespace

TEST(ModelGradients, DenseUntiedMatchesFiniteDifferences) {
  expect_gradients_match_finite_differences(tiny_dense_config(false), 0.0f);
}

TEST(ModelGradients, DenseTiedMatchesFiniteDifferences) {
  expect_gradients_match_finite_differences(tiny_dense_config(true), 0.0f);
}

TEST(ModelGradients, MoeUntiedWithAuxLossMatchesFiniteDifferences) {
  expect_gradients_match_finite_differences(tiny_moe_config(false), 0.5f);
}

TEST(ModelGradients, MoeTiedWithAuxLossMatchesFiniteDifferences) {
  ModelConfig config = tiny_moe_config(true);
  config.norm_topk_prob = false;
  expect_gradients_match_finite_differences(config, 0.5f);
}

// Sequences packed in one row give the same loss and gradient sums as the sequences run one by one.
TEST(ModelPacking, PackedBatchEqualsSeparateSequences) {
  for (const ModelConfig& config : {tiny_dense_config(false), tiny_moe_config(true)}) {
    const Batch packed = packed_batch({5, 4, 6}, config.vocab_size, 21);
    CausalLM together(config, ModelOptions{});
    CausalLM apart(config, ModelOptions{});
    together.init_weights(2);
    apart.init_weights(2);
    together.params().zero_grads();
    apart.params().zero_grads();

    SftPass all_pass = together.forward(packed, true);
    const ForwardStats all = all_pass.stats;
    together.backward(std::move(all_pass), 1.0f, 0.0f);
    double ce_sum = 0;
    int64_t valid = 0;
    for (size_t b = 0; b + 1 < packed.cu_seqlens.size(); ++b) {
      SftPass one_pass = apart.forward(sequence_of(packed, b), true);
      const ForwardStats one = one_pass.stats;
      apart.backward(std::move(one_pass), 1.0f, 0.0f);  // gradients accumulate over the three backward passes
      ce_sum += one.ce_sum;
      valid += one.valid_tokens;
    }
    EXPECT_EQ(all.valid_tokens, packed.valid_tokens);
    EXPECT_EQ(valid, all.valid_tokens);
    EXPECT_NEAR(all.ce_sum, ce_sum, 1e-5 * std::fabs(ce_sum));
    const auto g_all = grads_of(together), g_apart = grads_of(apart);
    for (const auto& [name, g] : g_all) {
      const auto& other = g_apart.at(name);
      for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], other[i], 1e-6 + 1e-4 * std::fabs(g[i])) << name << i;
    }
  }
}

TEST(ModelRecompute, GradientsAreBitwiseEqual) {
  for (const ModelConfig& config : {tiny_dense_config(true), tiny_moe_config(false)}) {
    ModelOptions recompute_options;
    recompute_options.recompute = true;
    CausalLM plain(config, ModelOptions{});
    CausalLM recomputed(config, recompute_options);
    plain.init_weights(4);
    recomputed.init_weights(4);
    const Batch batch = packed_batch({7, 3, 5}, config.vocab_size, 8);
    SftPass pass_a = plain.forward(batch, true);
    const ForwardStats a = pass_a.stats;
    plain.backward(std::move(pass_a), 0.1f, 0.3f);
    SftPass pass_b = recomputed.forward(batch, true);
    const ForwardStats b = pass_b.stats;
    recomputed.backward(std::move(pass_b), 0.1f, 0.3f);
    EXPECT_EQ(a.ce_sum, b.ce_sum);
    EXPECT_EQ(a.aux_loss, b.aux_loss);
    const auto ga = grads_of(plain), gb = grads_of(recomputed);
    for (const auto& [name, g] : ga) {
      const auto& other = gb.at(name);
      ASSERT_EQ(g.size(), other.size());
      EXPECT_EQ(std::memcmp(g.data(), other.data(), g.size() * sizeof(float)), 0) << name;
    }
  }
}

namespace {

// Frees every value of a group after its use and restores it before (what FSDP does with gathered copies), and
// records the order of the calls.
class FreeingParamHooks final : public ParamHooks {
 public:
  void before_forward(ParamGroup& g) override { restore(g, "F+"); }
  void after_forward(ParamGroup& g) override { stash(g, "F-"); }
  void before_backward(ParamGroup& g) override { restore(g, "B+"); }
  void after_backward(ParamGroup& g) override { stash(g, "B-"); }
  void free_all(ParamStore& store) {
    for (const auto& p : store.all()) {
      stash_[p.get()] = p->value;
      p->value = Tensor();
    }
  }
  std::vector<std::string> calls;

 private:
  void restore(ParamGroup& g, const char* what) {
    calls.push_back(std::string(what) + g.name);
    for (Parameter* p : g.params) p->value = stash_.at(p);
  }
  void stash(ParamGroup& g, const char* what) {
    calls.push_back(std::string(what) + g.name);
    for (Parameter* p : g.params) {
      stash_[p] = p->value;
      p->value = Tensor();
    }
  }
  std::map<Parameter*, Tensor> stash_;
};

}  // namespace

TEST(ModelHooks, ParameterValuesAreOnlyReadBetweenHookCalls) {
  const ModelConfig config = tiny_moe_config(true);
  FreeingParamHooks hooks;
  ModelOptions options;
  options.hooks.params = &hooks;
  CausalLM hooked(config, options);
  EXPECT_FALSE(hooked.params().all().front()->value.defined()) << "with parameter hooks the hooks own the storage";
  hooked.params().materialize_all(Device::cpu(), DType::F32);
  hooked.init_weights(9);
  hooks.free_all(hooked.params());

  CausalLM plain(config, ModelOptions{});
  plain.init_weights(9);
  const Batch batch = packed_batch({6, 6}, config.vocab_size, 1);
  SftPass pass_a = plain.forward(batch, true);
  const ForwardStats a = pass_a.stats;
  plain.backward(std::move(pass_a), 0.5f, 0.2f);
  SftPass pass_b = hooked.forward(batch, true);
  const ForwardStats b = pass_b.stats;
  hooked.backward(std::move(pass_b), 0.5f, 0.2f);
  EXPECT_EQ(a.ce_sum, b.ce_sum);
  EXPECT_EQ(a.aux_loss, b.aux_loss);
  const auto ga = grads_of(plain), gb = grads_of(hooked);
  for (const auto& [name, g] : ga) EXPECT_EQ(g, gb.at(name)) << name;

  const std::vector<std::string> expected = {
      "F+embed",    "F-embed",    "F+layers.0", "F-layers.0", "F+layers.1", "F-layers.1", "F+layers.2", "F-layers.2",
      "F+head",     "F-head",     "B+head",     "B-head",     "B+layers.2", "B-layers.2", "B+layers.1", "B-layers.1",
      "B+layers.0", "B-layers.0", "B+embed",    "B-embed"};
  EXPECT_EQ(hooks.calls, expected);
  // Tied: the head group lists the embedding too, owned by the embed group.
  const ParamGroup& head = hooked.params().groups().back();
  ASSERT_EQ(head.params.size(), 2u);
  EXPECT_EQ(head.params[1]->name, "model.embed_tokens.weight");
  EXPECT_EQ(head.params[1]->group, 0);
}

namespace {

// A one-rank stand-in for sequence hooks that hand attention more kv heads than the model has (as Ulysses does
// after the layer's repeat when P > kv heads): seq_to_heads repeats every kv head and heads_to_seq is the
// identity, so the layer must fold the repeated heads' gradients back.
class RepeatKvSequenceHooks final : public SequenceHooks {
 public:
  RepeatKvSequenceHooks(int64_t heads, int64_t kv_heads) : heads_(heads), kv_heads_(kv_heads) {}
  Tensor seq_to_heads(const Tensor& x) override {
    if (x.dim(1) != kv_heads_) return x;
    const int64_t s = x.dim(0), d = x.dim(2), rep = heads_ / kv_heads_;
    Tensor out = Tensor::empty({s, heads_, d}, DType::F32);
    const float* src = x.data<float>();
    float* dst = out.data<float>();
    for (int64_t t = 0; t < s; ++t)
      for (int64_t h = 0; h < heads_; ++h)
        std::memcpy(dst + (t * heads_ + h) * d, src + (t * kv_heads_ + h / rep) * d, sizeof(float) * d);
    return out;
  }
  void allreduce_sum(std::vector<double>& values) override { allreduce_calls += values.empty() ? 0 : 1; }
  int allreduce_calls = 0;

 private:
  int64_t heads_, kv_heads_;
};

}  // namespace

TEST(ModelHooks, RepeatedKvHeadsAreFoldedInBackward) {
  const ModelConfig config = tiny_moe_config(false);
  RepeatKvSequenceHooks sequence(config.num_attention_heads, config.num_key_value_heads);
  ModelOptions options;
  options.hooks.sequence = &sequence;
  CausalLM hooked(config, options);
  CausalLM plain(config, ModelOptions{});
  hooked.init_weights(6);
  plain.init_weights(6);
  const Batch batch = packed_batch({4, 8}, config.vocab_size, 2);
  SftPass pass_a = plain.forward(batch, true);
  const ForwardStats a = pass_a.stats;
  plain.backward(std::move(pass_a), 1.0f, 1.0f);
  SftPass pass_b = hooked.forward(batch, true);
  const ForwardStats b = pass_b.stats;
  hooked.backward(std::move(pass_b), 1.0f, 1.0f);
  EXPECT_EQ(sequence.allreduce_calls, 1) << "router statistics are summed over the SP group once per forward";
  EXPECT_NEAR(a.ce_sum, b.ce_sum, 1e-5 * a.ce_sum);
  EXPECT_NEAR(a.aux_loss, b.aux_loss, 1e-6);
  const auto ga = grads_of(plain), gb = grads_of(hooked);
  for (const auto& [name, g] : ga) {
    const auto& other = gb.at(name);
    for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], other[i], 1e-6 + 1e-4 * std::fabs(g[i])) << name << i;
  }
}

// A zero router gives uniform probabilities; top-k ties go to the lower indices, so experts 0..k-1 take every
// token and the others none: aux = E * sum_{e<k} 1 * (1/E) = k exactly, and empty experts must work.
TEST(ModelAuxLoss, UniformRouterGivesTopKAndEmptyExpertsWork) {
  ModelConfig config = tiny_moe_config(false);
  CausalLM model(config, ModelOptions{});
  model.init_weights(3);
  for (const auto& p : model.params().all())
    if (p->name.find("mlp.gate.weight") != std::string::npos) p->value.zero_();
  const Batch batch = packed_batch({5, 5}, config.vocab_size, 4);
  SftPass pass = model.forward(batch, true);
  const ForwardStats stats = pass.stats;
  EXPECT_NEAR(stats.aux_loss, static_cast<double>(config.num_experts_per_tok), 1e-6);
  model.backward(std::move(pass), 1.0f / static_cast<float>(stats.valid_tokens), 1.0f);
  const Parameter& gate_up = model.params().at("model.layers.0.mlp.experts.gate_up_proj");
  const std::vector<float> g = gate_up.grad.to_float_vector();
  const size_t per_expert = g.size() / 4;
  double used = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_TRUE(std::isfinite(g[i]));
    if (i >= 2 * per_expert) EXPECT_EQ(g[i], 0.0f) << "expert " << i / per_expert << " received no token";
    else used += std::fabs(g[i]);
  }
  EXPECT_GT(used, 0.0);

  config.output_router_logits = false;
  CausalLM no_aux(config, ModelOptions{});
  no_aux.init_weights(3);
  EXPECT_EQ(no_aux.forward(batch, false).stats.aux_loss, 0.0);
}

TEST(ModelForward, LossEqualsCrossEntropyOfReturnedLogits) {
  const ModelConfig config = tiny_moe_config(false);
  CausalLM model(config, ModelOptions{});
  model.init_weights(12);
  const Batch batch = packed_batch({6, 3, 5}, config.vocab_size, 13, 2);
  Tensor logits;
  SftPass pass = model.forward(batch, false, &logits);
  const ForwardStats stats = pass.stats;
  ASSERT_EQ(logits.shape(), (Shape{14, config.vocab_size}));
  double expected = 0;
  int64_t valid = 0;
  const float* l = logits.data<float>();
  for (int64_t t = 0; t < 14; ++t) {
    const int64_t target = static_cast<int64_t>(batch.target_ids.item_as_double(t));
    if (target == kIgnoreIndex) continue;
    const float* row = l + t * config.vocab_size;
    double max = row[0], sum = 0;
    for (int64_t v = 0; v < config.vocab_size; ++v) max = std::max(max, static_cast<double>(row[v]));
    for (int64_t v = 0; v < config.vocab_size; ++v) sum += std::exp(row[v] - max);
    expected += std::log(sum) + max - row[target];
    ++valid;
  }
  EXPECT_EQ(stats.valid_tokens, valid);
  EXPECT_EQ(valid, batch.valid_tokens);
  EXPECT_NEAR(stats.ce_sum, expected, 1e-5 * expected);
  // A loss-only forward keeps nothing for backward.
  EXPECT_EQ(pass.body, nullptr);
}

// forward returns the pass and backward consumes it: a pass without saved values (a loss-only forward, or one a
// backward already consumed) is an internal error, not a crash.
TEST(CausalLmPass, BackwardOfAnEmptyPassIsAnInternalError) {
  const ModelConfig config = tiny_moe_config(false);
  CausalLM model(config, ModelOptions{});
  model.init_weights(5);
  const Batch batch = packed_batch({5, 4}, config.vocab_size, 6);
  const std::vector<std::string> message{"backward of a pass without saved values"};
  SftPass loss_only = model.forward(batch, false);
  veomni::testing::expect_internal_error([&] { model.backward(std::move(loss_only), 1.0f, 0.5f); }, message);
  SftPass pass = model.forward(batch, true);
  model.backward(std::move(pass), 1.0f, 0.5f);
  EXPECT_EQ(pass.body, nullptr) << "backward consumes the pass";
  veomni::testing::expect_internal_error([&] { model.backward(std::move(pass), 1.0f, 0.5f); }, message);
}

// Two forwards, then their backwards in reverse order: each backward gives exactly the gradients of its own
// forward/backward pair, so the model keeps no state of a forward outside the pass. Compared one backward at a time,
// from zero gradients.
TEST(CausalLmPass, TwoForwardsThenReversedBackwardsMatchSeparatePairs) {
  const ModelConfig config = tiny_moe_config(true);
  CausalLM model(config, ModelOptions{});
  model.init_weights(8);
  const Batch batch_a = packed_batch({5, 4, 6}, config.vocab_size, 31, 1);
  const Batch batch_b = packed_batch({7, 3}, config.vocab_size, 32);
  auto pair = [&](const Batch& batch, ForwardStats& stats) {
    model.params().zero_grads();
    SftPass pass = model.forward(batch, true);
    stats = pass.stats;
    model.backward(std::move(pass), 0.1f, 0.3f);
    return grads_of(model);
  };
  ForwardStats stats_a, stats_b;
  const auto grads_a = pair(batch_a, stats_a), grads_b = pair(batch_b, stats_b);
  ASSERT_NE(grads_a, grads_b);

  SftPass pass_a = model.forward(batch_a, true);
  SftPass pass_b = model.forward(batch_b, true);
  EXPECT_EQ(pass_a.stats.ce_sum, stats_a.ce_sum);
  EXPECT_EQ(pass_a.stats.aux_loss, stats_a.aux_loss);
  EXPECT_EQ(pass_b.stats.ce_sum, stats_b.ce_sum);
  EXPECT_EQ(pass_b.stats.aux_loss, stats_b.aux_loss);
  model.params().zero_grads();
  model.backward(std::move(pass_b), 0.1f, 0.3f);
  EXPECT_EQ(grads_of(model), grads_b);
  model.params().zero_grads();
  model.backward(std::move(pass_a), 0.1f, 0.3f);
  EXPECT_EQ(grads_of(model), grads_a);
}

TEST(ModelForward, RejectsBadBatches) {
  const ModelConfig config = tiny_dense_config(false);
  CausalLM model(config, ModelOptions{});
  model.init_weights(1);
  // A batch built without the collator (which names the sample): the CPU embedding still refuses the id.
  Batch bad_token = packed_batch({4}, config.vocab_size, 1);
  bad_token.input_ids.data<int64_t>()[2] = config.vocab_size;
  try {
    model.forward(bad_token, false);
    FAIL() << "an out-of-vocabulary id must be rejected";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ids[2] = 50 is outside [0, 50)"), std::string::npos) << e.what();
  }
  Batch mrope = packed_batch({4}, config.vocab_size, 1);
  mrope.position_ids = Tensor::zeros({3, 4}, DType::I64);
  EXPECT_THROW(model.forward(mrope, false), InputError);
  Batch bad_cu = packed_batch({4}, config.vocab_size, 1);
  bad_cu.cu_seqlens = {0, 3};
  EXPECT_THROW(model.forward(bad_cu, false), InputError);
}

TEST(ModelParams, HfNamesShapesAndGroups) {
  CausalLM model(tiny_moe_config(false), ModelOptions{});
  ParamStore& store = model.params();
  EXPECT_EQ(store.at("model.embed_tokens.weight").shape, (Shape{50, 16}));
  EXPECT_EQ(store.at("model.layers.0.self_attn.q_proj.weight").shape, (Shape{32, 16}));
  EXPECT_EQ(store.at("model.layers.0.self_attn.k_proj.weight").shape, (Shape{16, 16}));
  EXPECT_EQ(store.at("model.layers.0.self_attn.o_proj.weight").shape, (Shape{16, 32}));
  EXPECT_EQ(store.at("model.layers.0.self_attn.q_norm.weight").shape, (Shape{8}));
  EXPECT_EQ(store.at("model.layers.0.mlp.gate.weight").shape, (Shape{4, 16}));
  EXPECT_EQ(store.at("model.layers.0.mlp.experts.gate_up_proj").shape, (Shape{4, 16, 16}));
  EXPECT_EQ(store.at("model.layers.0.mlp.experts.down_proj").shape, (Shape{4, 16, 8}));
  EXPECT_TRUE(store.at("model.layers.0.mlp.experts.down_proj").is_expert);
  EXPECT_EQ(store.at("model.layers.1.mlp.gate_proj.weight").shape, (Shape{24, 16}));
  EXPECT_EQ(store.at("lm_head.weight").shape, (Shape{50, 16}));
  EXPECT_EQ(store.find("model.layers.1.mlp.gate.weight"), nullptr);
  EXPECT_THROW(store.at("model.layers.9.mlp.gate.weight"), InputError);
  std::vector<std::string> groups;
  for (const ParamGroup& g : store.groups()) groups.push_back(g.name);
  EXPECT_EQ(groups, (std::vector<std::string>{"embed", "layers.0", "layers.1", "layers.2", "head"}));
  EXPECT_EQ(store.groups()[1].params.size(), 11u);  // 4 projections, 2 q/k norms, router, 2 experts, 2 norms
  CausalLM tied(tiny_dense_config(true), ModelOptions{});
  EXPECT_EQ(tied.params().find("lm_head.weight"), nullptr);
}

TEST(ModelAttention, RepeatAndFoldOfHeadsAreAdjoint) {
  Rng rng(1);
  auto random = [&](const Shape& shape) {
    Tensor t = Tensor::empty(shape, DType::F32);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(rng.uniform() - 0.5);
    return t;
  };
  const Tensor x = random({3, 2, 4});
  const Tensor y = random({3, 6, 4});
  const Tensor rx = repeat_heads(x, 3);
  ASSERT_EQ(rx.shape(), (Shape{3, 6, 4}));
  for (int64_t s = 0; s < 3; ++s)
    for (int64_t h = 0; h < 6; ++h)
      for (int64_t d = 0; d < 4; ++d)
        ASSERT_EQ(rx.data<float>()[(s * 6 + h) * 4 + d], x.data<float>()[(s * 2 + h / 3) * 4 + d]);
  const Tensor fy = fold_repeated_heads(y, 3);
  ASSERT_EQ(fy.shape(), (Shape{3, 2, 4}));
  double lhs = 0, rhs = 0;
  for (int64_t i = 0; i < y.numel(); ++i) lhs += static_cast<double>(rx.data<float>()[i]) * y.data<float>()[i];
  for (int64_t i = 0; i < x.numel(); ++i) rhs += static_cast<double>(x.data<float>()[i]) * fy.data<float>()[i];
  EXPECT_NEAR(lhs, rhs, 1e-5);
  EXPECT_EQ(repeat_heads(x, 1).data<float>(), x.data<float>()) << "no repeat is no copy";
}
