// Unit tests of generation: the KV-cache path against full recomputation (dense and MoE, batched prompts of
// different lengths, with unmerged LoRA adapters), the KV-cache ops (attention_kv_cache, kv_cache_write,
// qkv_norm_rope_cache_write), matmul_swiglu and argmax_rows against naive computations, and the sampling rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "generate/decode_steps.h"
#include "generate/generator.h"
#include "generate/sampling.h"
#include "kernels/decode_ops.h"
#include "kernels/ops.h"
#include "model/causal_lm.h"
#include "model/moe.h"
#include "test_model_util.h"
#include "test_ops_util.h"

using namespace veomni;

namespace {

// A toy model with weights large enough that the logits of different tokens differ clearly.
std::unique_ptr<CausalLM> toy_model(ModelConfig config, const ModelOptions& options = {}) {
  config.initializer_range = 0.3;
  auto model = std::make_unique<CausalLM>(config, options);
  model->init_weights(7);
  return model;
}

std::vector<std::vector<int64_t>> toy_prompts(int64_t vocab) {
  std::mt19937 rng(3);
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t len : {5, 1, 9}) {
    std::vector<int64_t> p;
    for (int64_t i = 0; i < len; ++i) p.push_back(static_cast<int64_t>(rng() % static_cast<uint32_t>(vocab)));
    prompts.push_back(p);
  }
  return prompts;
}

// The f32 logits [len, V] of a whole sequence by the training forward (no cache).
Tensor full_forward_logits(CausalLM& model, const std::vector<int64_t>& ids) {
  const int64_t n = static_cast<int64_t>(ids.size());
  Batch b;
  b.input_ids = Tensor::from_vector(ids, {n});
  std::vector<int64_t> targets(ids.begin() + 1, ids.end()), positions(static_cast<size_t>(n));
  targets.push_back(kIgnoreIndex);
  for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = i;
  b.target_ids = Tensor::from_vector(targets, {n});
  b.position_ids = Tensor::from_vector(positions, {n});
  b.cu_seqlens = {0, static_cast<int32_t>(n)};
  Tensor logits;
  model.forward(b, false, &logits);
  return logits;
}

// Every step's logits of every prompt through the cache equal the full forward's at that position (1e-5), and each
// greedy token is the argmax of the full forward's logits.
void expect_cache_matches_recompute(std::unique_ptr<CausalLM> model) {
  GenerateOptions options;
  options.max_new_tokens = 7;
  Generator generator(*model, options);
  std::map<int64_t, std::vector<std::vector<float>>> seen;  // prompt -> per step logits
  generator.set_logits_observer([&](const std::vector<int64_t>& rows, const Tensor& logits) {
    const int64_t vocab = logits.dim(1);
    for (size_t r = 0; r < rows.size(); ++r) {
      const float* p = logits.data<float>() + static_cast<int64_t>(r) * vocab;
      seen[rows[r]].emplace_back(p, p + vocab);
    }
  });
  const auto prompts = toy_prompts(model->config().vocab_size);
  const std::vector<Generation> out = generator.generate(prompts, 0);
  ASSERT_EQ(out.size(), prompts.size());
  std::set<int64_t> distinct_tokens;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(out[i].finish_reason, "length");
    ASSERT_EQ(out[i].token_ids.size(), 7u);
    ASSERT_EQ(seen[static_cast<int64_t>(i)].size(), 7u);
    std::vector<int64_t> whole = prompts[i];
    whole.insert(whole.end(), out[i].token_ids.begin(), out[i].token_ids.end());
    const Tensor full = full_forward_logits(*model, whole);
    const int64_t vocab = full.dim(1);
    for (size_t t = 0; t < 7; ++t) {
      const int64_t pos = static_cast<int64_t>(prompts[i].size() + t) - 1;
      const float* want = full.data<float>() + pos * vocab;
      const std::vector<float>& got = seen[static_cast<int64_t>(i)][t];
      for (int64_t v = 0; v < vocab; ++v)
        ASSERT_NEAR(got[static_cast<size_t>(v)], want[v], 1e-5) << "prompt " << i << " step " << t << " token " << v;
      const int64_t argmax = std::max_element(want, want + vocab) - want;
      EXPECT_EQ(out[i].token_ids[t], argmax) << "prompt " << i << " step " << t;
      distinct_tokens.insert(out[i].token_ids[t]);
    }
  }
  EXPECT_GT(distinct_tokens.size(), 2u) << "the toy model should not repeat one token";
}

// A toy whose projections in `modules` carry LoRA adapters (rank 2, alpha 4) with random B (B starts at zero: an
// adapter would add nothing); `adapted` gets the names of the B parameters set.
std::unique_ptr<CausalLM> toy_with_adapters(const ModelConfig& config, std::vector<std::string> modules,
                                            uint32_t seed, std::vector<std::string>& adapted) {
  ModelOptions options;
  options.lora_config.rank = 2;
  options.lora_config.alpha = 4;
  options.lora_config.lora_modules = std::move(modules);
  auto model = toy_model(config, options);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  for (const std::unique_ptr<Parameter>& param : model->params().all()) {
    if (!param->name.ends_with(".lora_B.weight")) continue;
    float* b = param->value.data<float>();
    for (int64_t i = 0; i < param->value.numel(); ++i) b[i] = normal(rng);
    adapted.push_back(param->name);
  }
  return model;
}

TEST(GenerateCache, DenseMatchesFullForward) {
  expect_cache_matches_recompute(toy_model(test::tiny_dense_config(false)));
}

TEST(GenerateCache, MoeMatchesFullForward) { expect_cache_matches_recompute(toy_model(test::tiny_moe_config(true))); }

// Unmerged LoRA adapters on the experts: their decode step goes through the block's grouped GEMMs (MoeBlock::forward),
// not ops::moe_decode_experts, and still gives the full forward's logits.
TEST(GenerateCache, MoeWithExpertAdaptersMatchesFullForward) {
  std::vector<std::string> adapted;
  auto model = toy_with_adapters(test::tiny_moe_config(true), {"gate_proj", "up_proj", "down_proj"}, 6, adapted);
  const auto on_experts = std::count_if(adapted.begin(), adapted.end(), [](const std::string& name) {
    return name.find(".experts.") != std::string::npos;
  });
  ASSERT_GE(on_experts, 4);
  EXPECT_FALSE(model->body().decodes_on_device(1));
  expect_cache_matches_recompute(std::move(model));
}

// A sparse layer's decode step reads nothing back to the host (so a recorded graph can hold it) up to
// kDecodePairsOnDevice (row, expert) pairs and without adapters on its experts; a dense model's never does.
TEST(GenerateCache, MoeDecodeStepsStayOnTheDeviceUpToTheirPairBound) {
  auto moe = toy_model(test::tiny_moe_config(true));  // two experts a token
  EXPECT_TRUE(moe->body().decodes_on_device(1));
  EXPECT_TRUE(moe->body().decodes_on_device(MoeBlock::kDecodePairsOnDevice / 2));
  EXPECT_FALSE(moe->body().decodes_on_device(MoeBlock::kDecodePairsOnDevice / 2 + 1));
  EXPECT_TRUE(toy_model(test::tiny_dense_config(false))->body().decodes_on_device(100000));
}

// Three dense layers between sparse ones (mlp_only_layers): the decode step runs the dense run as one op
// (ops::dense_decode_layers), each of its layers on its own caches, between the sparse layers' own steps.
TEST(GenerateCache, DenseRunBetweenSparseLayersMatchesFullForward) {
  ModelConfig config = test::tiny_moe_config(true);
  config.num_hidden_layers = 5;
  config.mlp_only_layers = {1, 2, 3};
  expect_cache_matches_recompute(toy_model(config));
}

// Unmerged LoRA adapters: decoding adds each adapter's part into the output its projection accumulates into (o_proj
// and down_proj add into the residual), and a gate/up pair with an adapter stays unfused.
TEST(GenerateCache, DenseWithAdaptersMatchesFullForward) {
  std::vector<std::string> adapted;
  auto model =
      toy_with_adapters(test::tiny_dense_config(false), {"q_proj", "o_proj", "gate_proj", "down_proj"}, 5, adapted);
  ASSERT_GE(adapted.size(), 4u);
  expect_cache_matches_recompute(std::move(model));
}

Parameter& param_named(CausalLM& model, const std::string& name) {
  for (const std::unique_ptr<Parameter>& param : model.params().all())
    if (param->name == name) return *param;
  throw Error("no parameter " + name);
}

// Decoding's fused gate|up weight: the parameters keep their values and now view one tensor (no memory added), and
// the training forward gives the same logits as before.
TEST(GenerateCache, FusedGateUpKeepsTheWeightsAndTheForward) {
  auto model = toy_model(test::tiny_dense_config(false));
  Parameter& gate = param_named(*model, "model.layers.0.mlp.gate_proj.weight");
  Parameter& up = param_named(*model, "model.layers.0.mlp.up_proj.weight");
  const std::vector<float> gate_before = gate.value.to_float_vector(), up_before = up.value.to_float_vector();
  const std::vector<int64_t> ids = {3, 5, 7, 11, 2};
  const std::vector<float> logits_before = full_forward_logits(*model, ids).to_float_vector();
  model->body().fuse_for_decoding();
  EXPECT_EQ(gate.value.to_float_vector(), gate_before);
  EXPECT_EQ(up.value.to_float_vector(), up_before);
  EXPECT_EQ(static_cast<const char*>(up.value.raw_data()),
            static_cast<const char*>(gate.value.raw_data()) + gate.value.nbytes())
      << "gate and up should be the halves of one tensor";
  EXPECT_EQ(full_forward_logits(*model, ids).to_float_vector(), logits_before);
}

TEST(GenerateCache, StopTokenEndsOnlyItsSequence) {
  const ModelConfig config = test::tiny_dense_config(false);
  auto model = toy_model(config);
  const auto prompts = toy_prompts(config.vocab_size);
  GenerateOptions options;
  options.max_new_tokens = 6;
  const std::vector<Generation> free_run = Generator(*model, options).generate(prompts, 0);
  // The third token of prompt 0 becomes a stop token: prompt 0 ends there; a prompt that never produces it runs on.
  const int64_t stop = free_run[0].token_ids[2];
  options.stop_token_ids = {stop};
  const std::vector<Generation> stopped = Generator(*model, options).generate(prompts, 0);
  const auto first_stop = std::find(free_run[0].token_ids.begin(), free_run[0].token_ids.end(), stop);
  const size_t expected_len = static_cast<size_t>(first_stop - free_run[0].token_ids.begin()) + 1;
  EXPECT_EQ(stopped[0].finish_reason, "stop");
  ASSERT_EQ(stopped[0].token_ids.size(), expected_len);
  EXPECT_EQ(stopped[0].token_ids.back(), stop);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& free_ids = free_run[i].token_ids;
    if (std::find(free_ids.begin(), free_ids.end(), stop) != free_ids.end()) continue;
    EXPECT_EQ(stopped[i].finish_reason, "length");
    EXPECT_EQ(stopped[i].token_ids, free_ids);
  }
}

// Greedy steps run several between reads to the host (each feeding its ids to the next on the device) give the ids
// of one read a step: batched prompts of different lengths, runs cut short by max_new_tokens (7 is no multiple of
// 3 or 4), a stop token inside a run (its sequence keeps the tokens up to it, the others run on), M-RoPE positions.
TEST(GenerateCache, SeveralStepsBetweenReadsGiveTheSameIds) {
  for (bool mrope : {false, true}) {
    SCOPED_TRACE(mrope ? "M-RoPE positions" : "1-D positions");
    const ModelConfig config = test::tiny_dense_config(false);
    ModelOptions model_options;
    if (mrope) model_options.mrope_section = {2, 1, 1};  // head_dim 8: 4 frequencies
    auto model = toy_model(config, model_options);
    const auto prompts = toy_prompts(config.vocab_size);
    GenerateOptions options;
    options.max_new_tokens = 7;
    options.mrope_positions = mrope;
    const std::vector<Generation> each_step = Generator(*model, options).generate(prompts, 0);
    const int64_t stop = each_step[0].token_ids[2];
    for (int64_t steps : {3, 4, 16}) {
      SCOPED_TRACE(::testing::Message() << steps << " steps a read");
      options.steps_per_sync = steps;
      options.stop_token_ids.clear();
      const std::vector<Generation> batched = Generator(*model, options).generate(prompts, 0);
      for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(batched[i].token_ids, each_step[i].token_ids) << i;
      EXPECT_EQ(batched[0].decode_steps, each_step[0].decode_steps);

      options.stop_token_ids = {stop};
      GenerateOptions one_step = options;
      one_step.steps_per_sync = 1;
      const std::vector<Generation> stopped_each = Generator(*model, one_step).generate(prompts, 0);
      const std::vector<Generation> stopped = Generator(*model, options).generate(prompts, 0);
      EXPECT_EQ(stopped[0].finish_reason, "stop");
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(stopped[i].token_ids, stopped_each[i].token_ids) << i;
        EXPECT_EQ(stopped[i].finish_reason, stopped_each[i].finish_reason) << i;
      }
    }
  }
  GenerateOptions bad;
  bad.steps_per_sync = 0;
  auto model = toy_model(test::tiny_dense_config(false));
  EXPECT_THROW(Generator(*model, bad), InputError);
}

// Greedy decoding queues each run before the host has read the run before it (GreedyPipeline), from the tables that
// run advanced on the device. With one or three steps a run, with and without a stop token inside a run (the run
// queued after it still decodes the stopped row, whose tokens are dropped), the ids, the finish reasons and the
// decode steps equal those of one read a step (a logits observer keeps the generator reading every step).
TEST(GenerateCache, RunsQueuedAheadOfTheHostGiveTheIdsOfStepByStepReads) {
  const ModelConfig config = test::tiny_dense_config(false);
  auto model = toy_model(config);
  const auto prompts = toy_prompts(config.vocab_size);
  GenerateOptions options;
  options.max_new_tokens = 7;
  const int64_t stop = Generator(*model, options).generate(prompts, 0)[0].token_ids[2];
  for (const bool stopping : {false, true}) {
    options.stop_token_ids = stopping ? std::vector<int64_t>{stop} : std::vector<int64_t>{};
    for (const int64_t steps : {1, 3}) {
      SCOPED_TRACE(::testing::Message() << steps << " steps a run, stop token " << stopping);
      options.steps_per_sync = steps;
      Generator read_every_step(*model, options);
      read_every_step.set_logits_observer([](const std::vector<int64_t>&, const Tensor&) {});
      const std::vector<Generation> want = read_every_step.generate(prompts, 0);
      const std::vector<Generation> got = Generator(*model, options).generate(prompts, 0);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].token_ids, want[i].token_ids) << "prompt " << i;
        EXPECT_EQ(got[i].finish_reason, want[i].finish_reason) << "prompt " << i;
        EXPECT_EQ(got[i].decode_steps, want[i].decode_steps) << "prompt " << i;
      }
      EXPECT_EQ(got[0].finish_reason, stopping ? "stop" : "length");
    }
  }
}

// A continuation needs a greedy run before it with its rows.
TEST(GenerateCache, ContinuingWithoutAGreedyRunIsAnError) {
  const ModelConfig config = test::tiny_dense_config(false);
  auto model = toy_model(config);
  model->body().fuse_for_decoding();
  KvCache cache = KvCache::allocate(config, 2, 8, DType::F32, Device::cpu());
  DecodeSteps decode(*model, cache, 2, false, true, false);
  EXPECT_THROW(decode.continue_greedy(1, 1), Error);
  DecodeRows rows;
  rows.ids = {1, 2};
  rows.positions = {0, 0};
  rows.slots = {0, 1};
  rows.cache_rows = {0, 0};
  decode.run_greedy(rows, 1);
  EXPECT_THROW(decode.continue_greedy(1, 1), Error);  // the run had two rows
  EXPECT_EQ(decode.continue_greedy(2, 2).shape(), (Shape{2, 2}));
}

TEST(GenerateCache, SamplingDoesNotDependOnBatching) {
  const ModelConfig config = test::tiny_moe_config(false);
  auto model = toy_model(config);
  const auto prompts = toy_prompts(config.vocab_size);
  GenerateOptions options;
  options.max_new_tokens = 6;
  options.sampling.temperature = 1.5;
  options.sampling.seed = 11;
  const std::vector<Generation> together = Generator(*model, options).generate(prompts, 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<Generation> alone = Generator(*model, options).generate({prompts[i]}, static_cast<int64_t>(i));
    EXPECT_EQ(alone[0].token_ids, together[i].token_ids) << "prompt " << i;
  }
  options.sampling.seed = 12;
  const std::vector<Generation> other_seed = Generator(*model, options).generate(prompts, 0);
  bool any_differs = false;
  for (size_t i = 0; i < prompts.size(); ++i) any_differs |= other_seed[i].token_ids != together[i].token_ids;
  EXPECT_TRUE(any_differs) << "another seed should draw other tokens";
}

// The [2, N] device table attention_kv_cache reads: slots, then kv lengths.
Tensor cache_rows(const std::vector<int32_t>& slots, const std::vector<int32_t>& kv_lens) {
  std::vector<int32_t> rows(slots);
  rows.insert(rows.end(), kv_lens.begin(), kv_lens.end());
  return Tensor::from_vector(rows, {2, static_cast<int64_t>(slots.size())});
}

TEST(OpsAttentionKvCache, MatchesNaiveComputation) {
  std::mt19937 rng(5);
  const int64_t batch = 3, cache_len = 7, hkv = 2, hq = 6, d = 8, n = 4;
  const Tensor q = test_ops::random_f32({n, hq, d}, rng);
  const Tensor k = test_ops::random_f32({batch, cache_len, hkv, d}, rng);
  const Tensor v = test_ops::random_f32({batch, cache_len, hkv, d}, rng);
  const std::vector<int32_t> slots = {2, 0, 1, 2}, kv_lens = {7, 1, 4, 3};
  const float scale = 0.4f;
  Tensor out = Tensor::empty({n, hq, d}, DType::F32);
  ops::attention_kv_cache(q, k, v, cache_rows(slots, kv_lens), scale, out);
  test_ops::Doubles want;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t g = h / (hq / hkv), slot = slots[static_cast<size_t>(r)], len = kv_lens[static_cast<size_t>(r)];
      std::vector<double> w(static_cast<size_t>(len));
      double total = 0;
      for (int64_t j = 0; j < len; ++j) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i)
          dot += q.item_as_double((r * hq + h) * d + i) * k.item_as_double(((slot * cache_len + j) * hkv + g) * d + i);
        w[static_cast<size_t>(j)] = std::exp(dot * scale);
        total += w[static_cast<size_t>(j)];
      }
      for (int64_t i = 0; i < d; ++i) {
        double acc = 0;
        for (int64_t j = 0; j < len; ++j)
          acc += w[static_cast<size_t>(j)] / total * v.item_as_double(((slot * cache_len + j) * hkv + g) * d + i);
        want.push_back(acc);
      }
    }
  }
  EXPECT_TRUE(test_ops::all_close(out, want, 1e-5, 1e-6));
}

TEST(OpsAttentionKvCache, RejectsRowsOutsideTheCache) {
  std::mt19937 rng(5);
  const Tensor q = test_ops::random_f32({1, 2, 4}, rng);
  const Tensor k = test_ops::random_f32({1, 3, 1, 4}, rng);
  Tensor out = Tensor::empty({1, 2, 4}, DType::F32);
  EXPECT_THROW(ops::attention_kv_cache(q, k, k, cache_rows({0}, {4}), 1.0f, out), Error);
  EXPECT_THROW(ops::attention_kv_cache(q, k, k, cache_rows({1}, {2}), 1.0f, out), Error);
  EXPECT_THROW(ops::attention_kv_cache(q, k, k, cache_rows({0}, {0}), 1.0f, out), Error);
  EXPECT_THROW(ops::attention_kv_cache(q, k, k, std::vector<int32_t>{0}, std::vector<int32_t>{4}, 1.0f, out), Error);
  EXPECT_THROW(ops::attention_kv_cache(q, k, k, Tensor::from_vector(std::vector<int64_t>{0, 1}, {2, 1}), 1.0f, out),
               Error);
}

TEST(OpsKvCacheWrite, WritesEachRowToItsFlatCacheRow) {
  std::mt19937 rng(3);
  const int64_t batch = 2, cache_len = 4, hkv = 2, d = 3;
  const Tensor rows = test_ops::random_f32({3, hkv, d}, rng);
  Tensor cache = Tensor::zeros({batch, cache_len, hkv, d}, DType::F32);
  const std::vector<int32_t> dest = {5, 0, 3};  // slot 1 row 1, slot 0 row 0, slot 0 row 3
  ops::kv_cache_write(rows, Tensor::from_vector(dest, {3}), cache);
  const int64_t width = hkv * d;
  for (int64_t flat = 0; flat < batch * cache_len; ++flat) {
    const auto it = std::find(dest.begin(), dest.end(), static_cast<int32_t>(flat));
    for (int64_t i = 0; i < width; ++i) {
      const double want = it == dest.end() ? 0.0 : rows.item_as_double((it - dest.begin()) * width + i);
      EXPECT_EQ(cache.item_as_double(flat * width + i), want) << "cache row " << flat << " element " << i;
    }
  }
  EXPECT_THROW(ops::kv_cache_write(rows, Tensor::from_vector(std::vector<int32_t>{0, 8, 1}, {3}), cache), Error);
  EXPECT_THROW(ops::kv_cache_write(rows, Tensor::from_vector(std::vector<int32_t>{0, -1, 1}, {3}), cache), Error);
}

// Qwen3's attention inputs by hand, from the packed projections (each token's query heads, key heads, value heads):
// each query and key head normalised (RMS over its D values, times the weight) and rotated with the half-split layout
// at its token's angles, into q and k; the values into v; k and v also into their cache rows.
TEST(OpsQkvNormRopeCacheWrite, NormalisesRotatesAndWritesTheCache) {
  std::mt19937 rng(11);
  const int64_t s = 3, hq = 4, hkv = 2, d = 6, half = d / 2, batch = 2, cache_len = 5, heads = hq + 2 * hkv;
  const float eps = 1e-6f;
  const Tensor qkv = test_ops::random_f32({s, heads * d}, rng);
  const Tensor wq = test_ops::random_f32({d}, rng), wk = test_ops::random_f32({d}, rng);
  Tensor cos = Tensor::empty({s, d}, DType::F32), sin = Tensor::empty({s, d}, DType::F32);
  for (int64_t t = 0; t < s; ++t)
    for (int64_t i = 0; i < d; ++i) {
      const double angle = (t + 1) * 0.7 * (i % half + 1);
      cos.data<float>()[t * d + i] = static_cast<float>(std::cos(angle));
      sin.data<float>()[t * d + i] = static_cast<float>(std::sin(angle));
    }
  const std::vector<int32_t> dest = {7, 0, 3};
  Tensor q = Tensor::empty({s, hq, d}, DType::F32), k = Tensor::empty({s, hkv, d}, DType::F32);
  Tensor v = Tensor::empty({s, hkv, d}, DType::F32);
  Tensor k_cache = Tensor::zeros({batch, cache_len, hkv, d}, DType::F32);
  Tensor v_cache = Tensor::zeros({batch, cache_len, hkv, d}, DType::F32);
  ops::qkv_norm_rope_cache_write(qkv, wq, wk, eps, cos, sin, Tensor::from_vector(dest, {s}), q, k, v, k_cache,
                                 v_cache);

  // Head `h` of the packed row of token t (query heads first, then keys, then values), normalised and rotated.
  auto expected = [&](const Tensor& w, int64_t t, int64_t h, int64_t i) {
    const float* x = qkv.data<float>() + (t * heads + h) * d;
    double squares = 0;
    for (int64_t j = 0; j < d; ++j) squares += static_cast<double>(x[j]) * x[j];
    const double r = 1.0 / std::sqrt(squares / d + eps);
    auto y = [&](int64_t j) { return x[j] * r * w.data<float>()[j]; };
    const double rotated_half = i < half ? -y(i + half) : y(i - half);
    return y(i) * cos.data<float>()[t * d + i] + rotated_half * sin.data<float>()[t * d + i];
  };
  for (int64_t t = 0; t < s; ++t)
    for (int64_t i = 0; i < d; ++i) {
      for (int64_t h = 0; h < hq; ++h)
        EXPECT_NEAR(q.item_as_double((t * hq + h) * d + i), expected(wq, t, h, i), 1e-5)
            << "q token " << t << " head " << h << " dim " << i;
      for (int64_t h = 0; h < hkv; ++h) {
        EXPECT_NEAR(k.item_as_double((t * hkv + h) * d + i), expected(wk, t, hq + h, i), 1e-5)
            << "k token " << t << " head " << h << " dim " << i;
        EXPECT_EQ(v.item_as_double((t * hkv + h) * d + i), qkv.item_as_double((t * heads + hq + hkv + h) * d + i));
        EXPECT_EQ(k_cache.item_as_double((dest[t] * hkv + h) * d + i), k.item_as_double((t * hkv + h) * d + i));
        EXPECT_EQ(v_cache.item_as_double((dest[t] * hkv + h) * d + i), v.item_as_double((t * hkv + h) * d + i));
      }
    }
  // Rows not written stay as they were.
  EXPECT_EQ(k_cache.item_as_double((1 * hkv) * d), 0.0);
  EXPECT_THROW(ops::qkv_norm_rope_cache_write(qkv, wq, wk, eps, cos, sin,
                                              Tensor::from_vector(std::vector<int32_t>{0, 10, 1}, {s}), q, k, v,
                                              k_cache, v_cache),
               Error);
}

// Decoding's fused q|k|v weight: the parameters keep their values and now view one tensor (no memory added), the
// training forward gives the same logits as before, and the cached path still equals the full forward (checked with
// the fused weights by GenerateCache.DenseMatchesFullForward, whose generator fuses them).
TEST(GenerateCache, FusedQkvKeepsTheWeightsAndTheForward) {
  auto model = toy_model(test::tiny_dense_config(false));
  Parameter& q = param_named(*model, "model.layers.0.self_attn.q_proj.weight");
  Parameter& k = param_named(*model, "model.layers.0.self_attn.k_proj.weight");
  Parameter& v = param_named(*model, "model.layers.0.self_attn.v_proj.weight");
  const std::vector<float> q_before = q.value.to_float_vector(), k_before = k.value.to_float_vector(),
                           v_before = v.value.to_float_vector();
  const std::vector<int64_t> ids = {3, 5, 7, 11, 2};
  const std::vector<float> logits_before = full_forward_logits(*model, ids).to_float_vector();
  model->body().fuse_for_decoding();
  EXPECT_EQ(q.value.to_float_vector(), q_before);
  EXPECT_EQ(k.value.to_float_vector(), k_before);
  EXPECT_EQ(v.value.to_float_vector(), v_before);
  const char* base = static_cast<const char*>(q.value.raw_data());
  EXPECT_EQ(static_cast<const char*>(k.value.raw_data()), base + q.value.nbytes());
  EXPECT_EQ(static_cast<const char*>(v.value.raw_data()), base + q.value.nbytes() + k.value.nbytes())
      << "q, k and v should be consecutive blocks of one tensor";
  EXPECT_EQ(full_forward_logits(*model, ids).to_float_vector(), logits_before);
}

TEST(OpsArgmaxRows, FirstGreatestValueOfEachRow) {
  const float nan = std::nanf("");
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 3, 2, 3,     // tie: the lower index
                                                          -5, -4, -4, -6,  // negative values
                                                          0, nan, 9, nan,  // the first NaN wins, as torch.argmax
                                                          7, 7, 7, 7},
                                       {4, 4});
  Tensor ids = Tensor::empty({4}, DType::I64);
  ops::argmax_rows(x, ids);
  EXPECT_EQ(ids.data<int64_t>()[0], 1);
  EXPECT_EQ(ids.data<int64_t>()[1], 1);
  EXPECT_EQ(ids.data<int64_t>()[2], 1);
  EXPECT_EQ(ids.data<int64_t>()[3], 0);
  Tensor wrong = Tensor::empty({4}, DType::I32);
  EXPECT_THROW(ops::argmax_rows(x, wrong), Error);
}

template <typename T>
std::vector<T> values_of(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

// The next greedy step's tables: the chosen ids in, every stream's positions, the flat cache rows and the kv lengths
// one on, the slots kept.
TEST(OpsAdvanceDecodeTables, FeedsTheChosenIdsAndMovesEveryRowOn) {
  const Tensor chosen = Tensor::from_vector(std::vector<int64_t>{42, 7}, {2});
  Tensor tokens = Tensor::from_vector(std::vector<int64_t>{1, 2, 10, 20, 11, 21, 12, 22}, {8});  // ids, 3 streams
  Tensor rows = Tensor::from_vector(std::vector<int32_t>{5, 108, 0, 1, 6, 9}, {6});  // flat rows, slots, kv lengths
  ops::advance_decode_tables(chosen, tokens, rows);
  EXPECT_EQ(values_of<int64_t>(tokens), (std::vector<int64_t>{42, 7, 11, 21, 12, 22, 13, 23}));
  EXPECT_EQ(values_of<int32_t>(rows), (std::vector<int32_t>{6, 109, 0, 1, 7, 10}));
  Tensor one_stream = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4}, {4});
  ops::advance_decode_tables(chosen, one_stream, rows);
  EXPECT_EQ(values_of<int64_t>(one_stream), (std::vector<int64_t>{42, 7, 4, 5}));
  Tensor two_streams = Tensor::zeros({6}, DType::I64), short_rows = Tensor::zeros({5}, DType::I32);
  EXPECT_THROW(ops::advance_decode_tables(chosen, two_streams, rows), Error);
  EXPECT_THROW(ops::advance_decode_tables(chosen, one_stream, short_rows), Error);
  EXPECT_THROW(ops::advance_decode_tables(Tensor::zeros({2}, DType::I32), one_stream, rows), Error);
}

// matmul_swiglu is matmul into [M, 2I] followed by swiglu_fused_forward, bit for bit on the CPU.
TEST(OpsMatmulSwiglu, EqualsMatmulThenSwiglu) {
  std::mt19937 rng(9);
  const auto random = [&](Shape shape) { return test_ops::random_f32(shape, rng); };
  for (const int64_t m : {1, 3, 17}) {
    const Tensor x = random({m, 24});
    const Tensor gate_up = random({2 * 10, 24});
    Tensor product = Tensor::empty({m, 20}, DType::F32);
    ops::matmul(x, false, gate_up, true, product);
    Tensor want = Tensor::empty({m, 10}, DType::F32);
    ops::swiglu_fused_forward(product, want);
    Tensor got = Tensor::empty({m, 10}, DType::F32);
    ops::matmul_swiglu(x, gate_up, got);
    EXPECT_EQ(got.to_float_vector(), want.to_float_vector()) << "m " << m;
  }
}

TEST(OpsMatmulSwiglu, RejectsMismatchedShapes) {
  const Tensor x = Tensor::zeros({2, 8}, DType::F32);
  Tensor out = Tensor::empty({2, 3}, DType::F32);
  EXPECT_THROW(ops::matmul_swiglu(x, Tensor::zeros({5, 8}, DType::F32), out), Error);  // odd rows: no [gate; up]
  EXPECT_THROW(ops::matmul_swiglu(x, Tensor::zeros({6, 7}, DType::F32), out), Error);  // K differs
  Tensor wide = Tensor::empty({2, 4}, DType::F32);
  EXPECT_THROW(ops::matmul_swiglu(x, Tensor::zeros({6, 8}, DType::F32), wide), Error);  // out is not [M, I]
}

// rmsnorm_matmul and rmsnorm_matmul_swiglu are rmsnorm_forward followed by matmul / matmul_swiglu, bit for bit on
// the CPU.
TEST(OpsRmsnormMatmul, EqualsTheNormThenTheGemm) {
  std::mt19937 rng(10);
  const auto random = [&](Shape shape) { return test_ops::random_f32(shape, rng); };
  for (const int64_t m : {1, 3, 17}) {
    const Tensor x = random({m, 24}), gain = random({24}), w = random({20, 24});
    Tensor normed = Tensor::empty({m, 24}, DType::F32), rstd = Tensor::empty({m}, DType::F32);
    ops::rmsnorm_forward(x, gain, 1e-5f, normed, rstd);
    Tensor want = Tensor::empty({m, 20}, DType::F32), got = Tensor::empty({m, 20}, DType::F32);
    ops::matmul(normed, false, w, true, want);
    ops::rmsnorm_matmul(x, gain, 1e-5f, w, got);
    EXPECT_EQ(got.to_float_vector(), want.to_float_vector()) << "m " << m;
    Tensor want_act = Tensor::empty({m, 10}, DType::F32), got_act = Tensor::empty({m, 10}, DType::F32);
    ops::matmul_swiglu(normed, w, want_act);
    ops::rmsnorm_matmul_swiglu(x, gain, 1e-5f, w, got_act);
    EXPECT_EQ(got_act.to_float_vector(), want_act.to_float_vector()) << "m " << m;
  }
}

TEST(OpsRmsnormMatmul, RejectsMismatchedShapes) {
  const Tensor x = Tensor::zeros({2, 8}, DType::F32), gain = Tensor::full<float>({8}, 1.0f);
  Tensor out = Tensor::empty({2, 6}, DType::F32), act = Tensor::empty({2, 3}, DType::F32);
  EXPECT_THROW(ops::rmsnorm_matmul(x, Tensor::full<float>({7}, 1.0f), 1e-6f, Tensor::zeros({6, 8}, DType::F32), out),
               Error);  // the gain is not [K]
  EXPECT_THROW(ops::rmsnorm_matmul(x, gain, 1e-6f, Tensor::zeros({6, 7}, DType::F32), out), Error);  // K differs
  EXPECT_THROW(ops::rmsnorm_matmul(x, gain, 1e-6f, Tensor::zeros({5, 8}, DType::F32), out), Error);  // out not [M, N]
  EXPECT_THROW(ops::rmsnorm_matmul_swiglu(x, gain, 1e-6f, Tensor::zeros({5, 8}, DType::F32), act), Error);  // odd
  EXPECT_THROW(ops::rmsnorm_matmul_swiglu(x, gain, 1e-6f, Tensor::zeros({6, 8}, DType::F32), out), Error);  // not I
}

// A toy dense layer's decode step for ops::dense_decode_layers on the CPU: f32 weights, two rows in cache slots 0 and
// 1 at positions 3 and 0.
struct DecodeLayerCase {
  ops::DenseDecodeLayer layer;
  Tensor cos, sin, write_rows, cache_rows, k_cache, v_cache, h;
};

DecodeLayerCase decode_layer_case(uint32_t seed = 14) {
  std::mt19937 rng(seed);
  const auto random = [&](Shape shape) { return test_ops::random_f32(shape, rng); };
  const int64_t hidden = 16, hq = 4, hkv = 2, d = 4, intermediate = 12, m = 2, capacity = 5;
  DecodeLayerCase c;
  c.layer.input_norm = random({hidden});
  c.layer.input_norm_eps = 1e-6f;
  c.layer.qkv = random({(hq + 2 * hkv) * d, hidden});
  c.layer.q_norm = random({d});
  c.layer.k_norm = random({d});
  c.layer.qk_norm_eps = 1e-6f;
  c.layer.q_heads = hq;
  c.layer.kv_heads = hkv;
  c.layer.head_dim = d;
  c.layer.scale = 0.5f;
  c.layer.o_proj = random({hidden, hq * d});
  c.layer.post_attention_norm = random({hidden});
  c.layer.post_attention_norm_eps = 1e-5f;
  c.layer.gate_up = random({2 * intermediate, hidden});
  c.layer.down = random({hidden, intermediate});
  c.cos = random({m, d});
  c.sin = random({m, d});
  c.write_rows = Tensor::from_vector(std::vector<int32_t>{3, capacity + 0}, {m});
  c.cache_rows = Tensor::from_vector(std::vector<int32_t>{0, 1, 4, 1}, {2, m});
  c.k_cache = random({2, capacity, hkv, d});
  c.v_cache = random({2, capacity, hkv, d});
  c.h = random({m, hidden});
  return c;
}

// The layer op is its ops in turn: the norm inside the q/k/v GEMM, the q/k norms and RoPE with the cache writes,
// attention over the cache, o_proj added into h, the norm inside the SwiGLU GEMM, down added into h.
TEST(OpsDenseDecodeLayer, IsItsOpsInTurn) {
  DecodeLayerCase got = decode_layer_case();
  DecodeLayerCase want = decode_layer_case();
  const ops::DenseDecodeLayer& l = want.layer;
  const int64_t m = 2;
  Tensor qkv = Tensor::empty({m, l.qkv.dim(0)}, DType::F32);
  ops::rmsnorm_matmul(want.h, l.input_norm, l.input_norm_eps, l.qkv, qkv);
  Tensor q = Tensor::empty({m, 4, 4}, DType::F32), k = Tensor::empty({m, 2, 4}, DType::F32);
  Tensor v = Tensor::empty({m, 2, 4}, DType::F32);
  ops::qkv_norm_rope_cache_write(qkv, l.q_norm, l.k_norm, l.qk_norm_eps, want.cos, want.sin, want.write_rows, q, k, v,
                                 want.k_cache, want.v_cache);
  Tensor attention = Tensor::empty({m, 4, 4}, DType::F32);
  ops::attention_kv_cache(q, want.k_cache, want.v_cache, want.cache_rows, l.scale, attention);
  ops::matmul(attention.view({m, 16}), false, l.o_proj, true, want.h, 1.0f, 1.0f);
  Tensor act = Tensor::empty({m, 12}, DType::F32);
  ops::rmsnorm_matmul_swiglu(want.h, l.post_attention_norm, l.post_attention_norm_eps, l.gate_up, act);
  ops::matmul(act, false, l.down, true, want.h, 1.0f, 1.0f);

  std::vector<Tensor> k_caches{got.k_cache}, v_caches{got.v_cache};
  ops::dense_decode_layers({got.layer}, got.cos, got.sin, got.write_rows, got.cache_rows, k_caches, v_caches, got.h);
  EXPECT_EQ(got.h.to_float_vector(), want.h.to_float_vector());
  EXPECT_EQ(got.k_cache.to_float_vector(), want.k_cache.to_float_vector());
  EXPECT_EQ(got.v_cache.to_float_vector(), want.v_cache.to_float_vector());
  EXPECT_NE(got.h.to_float_vector(), decode_layer_case().h.to_float_vector());  // the layer changed h
}

// Two layers in one call are the first layer's step, then the second's on its own caches.
TEST(OpsDenseDecodeLayer, RunIsEachLayerInTurn) {
  DecodeLayerCase first = decode_layer_case();
  DecodeLayerCase second = decode_layer_case(15);
  const DecodeLayerCase untouched = decode_layer_case(15);
  Tensor want_h = first.h.clone();
  std::vector<Tensor> want_k{first.k_cache.clone(), second.k_cache.clone()};
  std::vector<Tensor> want_v{first.v_cache.clone(), second.v_cache.clone()};
  const std::vector<ops::DenseDecodeLayer> layers{first.layer, second.layer};
  for (size_t i = 0; i < layers.size(); ++i) {
    std::vector<Tensor> k_caches{want_k[i]}, v_caches{want_v[i]};
    ops::dense_decode_layers({layers[i]}, first.cos, first.sin, first.write_rows, first.cache_rows, k_caches,
                             v_caches, want_h);
  }
  std::vector<Tensor> k_caches{first.k_cache, second.k_cache}, v_caches{first.v_cache, second.v_cache};
  ops::dense_decode_layers(layers, first.cos, first.sin, first.write_rows, first.cache_rows, k_caches, v_caches,
                           first.h);
  EXPECT_EQ(first.h.to_float_vector(), want_h.to_float_vector());
  for (size_t i = 0; i < layers.size(); ++i) {
    EXPECT_EQ(k_caches[i].to_float_vector(), want_k[i].to_float_vector()) << "layer " << i;
    EXPECT_EQ(v_caches[i].to_float_vector(), want_v[i].to_float_vector()) << "layer " << i;
  }
  EXPECT_NE(second.k_cache.to_float_vector(), untouched.k_cache.to_float_vector());  // the second layer wrote its own
}

TEST(OpsDenseDecodeLayer, RejectsMismatchedShapes) {
  auto run = [](DecodeLayerCase c) {
    std::vector<Tensor> k_caches{c.k_cache}, v_caches{c.v_cache};
    ops::dense_decode_layers({c.layer}, c.cos, c.sin, c.write_rows, c.cache_rows, k_caches, v_caches, c.h);
  };
  {
    DecodeLayerCase c = decode_layer_case();
    std::vector<Tensor> k_caches{c.k_cache, c.k_cache}, v_caches{c.v_cache};  // a key cache more than layers
    EXPECT_THROW(ops::dense_decode_layers({c.layer}, c.cos, c.sin, c.write_rows, c.cache_rows, k_caches, v_caches, c.h),
                 Error);
  }
  DecodeLayerCase c = decode_layer_case();
  c.layer.o_proj = Tensor::zeros({16, 12}, DType::F32);  // not [hidden, Hq D]
  EXPECT_THROW(run(c), Error);
  c = decode_layer_case();
  c.layer.gate_up = Tensor::zeros({23, 16}, DType::F32);  // an odd number of rows
  EXPECT_THROW(run(c), Error);
  c = decode_layer_case();
  c.layer.kv_heads = 3;  // 4 query heads are not a multiple
  EXPECT_THROW(run(c), Error);
  c = decode_layer_case();
  c.cos = Tensor::zeros({1, 4}, DType::F32);  // not a row per step row
  EXPECT_THROW(run(c), Error);
  c = decode_layer_case();
  c.cache_rows = Tensor::from_vector(std::vector<int32_t>{0, 1, 4, 6}, {2, 2});  // kv length past the capacity
  EXPECT_THROW(run(c), Error);
}

std::vector<float> spread_logits() { return {0.5f, 2.0f, -1.0f, 1.5f, 0.0f, 3.0f, -2.0f, 1.0f}; }

TEST(GenerateSampling, SameSeedSameDraws) {
  SamplingOptions o;
  o.temperature = 1.0;
  std::vector<int64_t> a, b, c;
  RandomStream ra(42, 3), rb(42, 3), rc(43, 3);
  for (int i = 0; i < 200; ++i) {
    a.push_back(choose_token(spread_logits(), {}, o, ra));
    b.push_back(choose_token(spread_logits(), {}, o, rb));
    c.push_back(choose_token(spread_logits(), {}, o, rc));
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(GenerateSampling, TopKNeverLeavesTheTopK) {
  SamplingOptions o;
  o.temperature = 2.0;
  o.top_k = 3;
  RandomStream random(1, 0);
  std::set<int64_t> drawn;
  for (int i = 0; i < 3000; ++i) drawn.insert(choose_token(spread_logits(), {}, o, random));
  EXPECT_EQ(drawn, (std::set<int64_t>{5, 1, 3}));  // logits 3.0, 2.0, 1.5: all drawn, nothing else
}

TEST(GenerateSampling, TopPNeverLeavesTheNucleus) {
  SamplingOptions o;
  o.temperature = 1.0;
  o.top_p = 0.8;
  // The nucleus: the most likely tokens until their probability reaches 0.8.
  std::vector<float> logits = spread_logits();
  const Candidates all = sampling_candidates(logits, {.temperature = 1.0});
  std::set<int64_t> nucleus;
  double mass = 0;
  for (size_t i = 0; i < all.ids.size() && mass < 0.8; ++i) {
    nucleus.insert(all.ids[i]);
    mass += all.probs[i];
  }
  ASSERT_GT(nucleus.size(), 1u);
  ASSERT_LT(nucleus.size(), logits.size());
  RandomStream random(9, 0);
  std::set<int64_t> drawn;
  for (int i = 0; i < 3000; ++i) drawn.insert(choose_token(logits, {}, o, random));
  EXPECT_EQ(drawn, nucleus);
}

TEST(GenerateSampling, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 4.0f};
  const std::vector<int64_t> seen = {0, 1, 0, 1};  // repeats count once
  apply_repetition_penalty(logits, seen, 2.0);
  EXPECT_FLOAT_EQ(logits[0], 1.0f);
  EXPECT_FLOAT_EQ(logits[1], -2.0f);
  EXPECT_FLOAT_EQ(logits[2], 0.5f);
  EXPECT_FLOAT_EQ(logits[3], 4.0f);
  // Greedy with the penalty moves off a repeated token.
  SamplingOptions o;
  o.repetition_penalty = 3.0;
  RandomStream random(0, 0);
  EXPECT_EQ(choose_token({4.0f, 2.0f}, std::vector<int64_t>{0}, o, random), 1);
  o.repetition_penalty = 1.0;
  EXPECT_EQ(choose_token({4.0f, 2.0f}, std::vector<int64_t>{0}, o, random), 0);
}

TEST(GenerateSampling, RejectsOptionsOutsideTheirRange) {
  EXPECT_THROW(validate_sampling_options({.temperature = -1}), InputError);
  EXPECT_THROW(validate_sampling_options({.top_k = -2}), InputError);
  EXPECT_THROW(validate_sampling_options({.top_p = 0}), InputError);
  EXPECT_THROW(validate_sampling_options({.top_p = 1.5}), InputError);
  EXPECT_THROW(validate_sampling_options({.repetition_penalty = 0}), InputError);
  EXPECT_NO_THROW(validate_sampling_options({}));
}

}  // namespace
