// KV-cache generation on the GPU: greedy decoding in bf16 on CUDA chooses the CPU fp32 reference's first 16 tokens
// on the dense toy (3 prompts of different lengths in one batch); the KV-cache kernels (attention_kv_cache with one
// and several splits of the sequence, kv_cache_write) and argmax_rows against the CPU ops in f32 and bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "generate/generator.h"
#include "gpu_test_util.h"
#include "kernels/decode_ops.h"
#include "kernels/ops.h"
#include "data/batch.h"
#include "model/causal_lm.h"
#include "model/model_config.h"

using namespace veomni;

namespace {

class GpuGenerate : public gpu_test::CudaTest {};

std::unique_ptr<CausalLM> toy_on(const ModelConfig& config, Device device, DType dtype) {
  ModelOptions options;
  options.device = device;
  options.compute_dtype = dtype;
  return std::make_unique<CausalLM>(config, options);
}

// Greedy steps of one prompt on the CPU: the tokens and, per step, the top-2 logit margin.
struct CpuPath {
  std::vector<int64_t> tokens;
  std::vector<double> margins;
  double min_margin() const { return *std::min_element(margins.begin(), margins.end()); }
};

CpuPath cpu_greedy_path(CausalLM& model, const std::vector<int64_t>& prompt, int64_t steps) {
  GenerateOptions options;
  options.max_new_tokens = steps;
  Generator generator(model, options);
  CpuPath path;
  generator.set_logits_observer([&](const std::vector<int64_t>&, const Tensor& logits) {
    std::vector<float> row(logits.data<float>(), logits.data<float>() + logits.dim(1));
    std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<float>());
    path.margins.push_back(row[0] - row[1]);
  });
  path.tokens = generator.generate({prompt}, 0)[0].token_ids;
  return path;
}

// The f32 CPU logits [len, V] of a whole sequence (no cache).
Tensor cpu_logits(CausalLM& model, const std::vector<int64_t>& ids) {
  const int64_t n = static_cast<int64_t>(ids.size());
  Batch b;
  b.input_ids = Tensor::from_vector(ids, {n});
  std::vector<int64_t> targets(static_cast<size_t>(n), kIgnoreIndex), positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = i;
  b.target_ids = Tensor::from_vector(targets, {n});
  b.position_ids = Tensor::from_vector(positions, {n});
  b.cu_seqlens = {0, static_cast<int32_t>(n)};
  Tensor logits;
  model.forward(b, false, &logits);
  return logits;
}

// bf16 greedy decoding on the GPU against the CPU fp32 reference, 16 tokens of 3 prompts decoded in one batch. The
// prompts are the 3 of 64 random ones whose CPU greedy path keeps the widest top-2 margin. Every GPU token must be
// the CPU's until the first step where the CPU's top-2 margin is within bf16 noise (tol = 3% of the step's largest
// logit): there bf16 may break the near-tie either way, and from there on each GPU token must be one the CPU (fed
// the GPU's tokens) rates within tol of its best. The dense toy: in the MoE toy bf16 flips near-tied router choices,
// which moves logits by more than any tolerance that would still test something.
TEST_F(GpuGenerate, DenseBf16GreedyMatchesCpuFp32) {
  constexpr int64_t kSteps = 16;
  ModelConfig config = load_model_config(std::string(VEOMNI_SOURCE_DIR) + "/configs/model_configs/qwen3_toy");
  config.initializer_range = 0.2;  // logits of different tokens far apart, as in the generation fixtures
  auto cpu = toy_on(config, Device::cpu(), DType::F32);
  cpu->init_weights(17);
  auto gpu = toy_on(config, Device::cuda(0), DType::BF16);
  const auto& from = cpu->params().all();
  const auto& to = gpu->params().all();
  ASSERT_EQ(from.size(), to.size());
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i]->value.defined()) to[i]->value.copy_from(from[i]->value.to_dtype(DType::BF16));

  std::mt19937 rng(5);
  std::vector<std::pair<double, std::vector<int64_t>>> candidates;
  for (int c = 0; c < 64; ++c) {
    std::vector<int64_t> p(static_cast<size_t>(2 + rng() % 10));
    for (int64_t& id : p) id = static_cast<int64_t>(rng() % static_cast<uint32_t>(config.vocab_size));
    candidates.emplace_back(cpu_greedy_path(*cpu, p, kSteps).min_margin(), p);
  }
  std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::vector<int64_t>> prompts;
  for (size_t i = 0; i < 3; ++i) prompts.push_back(candidates[i].second);

  GenerateOptions options;
  options.max_new_tokens = kSteps;
  const std::vector<Generation> got = Generator(*gpu, options).generate(prompts, 0);
  int64_t exact_total = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const CpuPath want = cpu_greedy_path(*cpu, prompts[i], kSteps);
    std::vector<int64_t> sequence = prompts[i];
    sequence.insert(sequence.end(), got[i].token_ids.begin(), got[i].token_ids.end());
    const Tensor logits = cpu_logits(*cpu, sequence);
    const int64_t vocab = logits.dim(1);
    bool diverged = false;
    ASSERT_EQ(got[i].token_ids.size(), static_cast<size_t>(kSteps));
    for (int64_t t = 0; t < kSteps; ++t) {
      const float* row = logits.data<float>() + (static_cast<int64_t>(prompts[i].size()) + t - 1) * vocab;
      const float best = *std::max_element(row, row + vocab);
      const double tol = 0.03 * std::fabs(best);
      const int64_t token = got[i].token_ids[static_cast<size_t>(t)];
      if (!diverged && want.margins[static_cast<size_t>(t)] < tol) diverged = true;  // a near-tie on the CPU
      if (!diverged) {
        ASSERT_EQ(token, want.tokens[static_cast<size_t>(t)]) << "prompt " << i << " step " << t;
        ++exact_total;
      } else {
        EXPECT_GE(row[token], best - tol) << "prompt " << i << " step " << t << ": the GPU chose a token the CPU "
                                          << "rates " << best - row[token] << " below its best";
      }
    }
  }
  std::printf("GPU bf16 greedy tokens equal to the CPU's before any near-tie: %lld of %lld\n",
              static_cast<long long>(exact_total), static_cast<long long>(kSteps * 3));
}

// Every logit row of every step, in the order the generator showed them.
struct StepLog {
  std::vector<std::vector<int64_t>> rows;
  std::vector<std::vector<float>> logits;
};

std::vector<Generation> generate_logged(CausalLM& model, const std::vector<std::vector<int64_t>>& prompts,
                                        GenerateOptions options, StepLog& log) {
  Generator generator(model, options);
  generator.set_logits_observer([&](const std::vector<int64_t>& rows, const Tensor& logits) {
    log.rows.push_back(rows);
    log.logits.push_back(logits.to_float_vector());
  });
  return generator.generate(prompts, 0);
}

// The bf16 toy the graph tests decode (the dense one unless named), on the GPU, and their three prompts of different
// lengths.
std::unique_ptr<CausalLM> graph_test_toy(const std::string& name = "qwen3_toy") {
  ModelConfig config = load_model_config(std::string(VEOMNI_SOURCE_DIR) + "/configs/model_configs/" + name);
  config.initializer_range = 0.2;
  auto model = toy_on(config, Device::cuda(0), DType::BF16);
  model->init_weights(23);
  return model;
}
const std::vector<std::vector<int64_t>> kGraphTestPrompts = {{5, 17, 3}, {9, 2, 44, 61, 8, 30, 12}, {71}};

// Decode steps replayed from recorded CUDA graphs give the op-by-op steps' logits bit for bit and the same tokens,
// while prompts finish at different steps (a stop token ends one early, so the row count shrinks and a new graph
// is recorded). The graphs really ran: most decode steps replayed one, and none did with cuda_graphs off.
void expect_graphed_steps_match_op_by_op(const std::string& toy) {
  auto model = graph_test_toy(toy);
  const std::vector<std::vector<int64_t>>& prompts = kGraphTestPrompts;
  GenerateOptions options;
  options.max_new_tokens = 24;
  options.cuda_graphs = false;
  StepLog first;
  const std::vector<Generation> unstopped = generate_logged(*model, prompts, options, first);
  // The fifth token of the second prompt stops it there (and any other prompt that makes it).
  options.stop_token_ids = {unstopped[1].token_ids[4]};

  StepLog eager, graphed;
  const std::vector<Generation> want = generate_logged(*model, prompts, options, eager);
  options.cuda_graphs = true;
  const std::vector<Generation> got = generate_logged(*model, prompts, options, graphed);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].token_ids, want[i].token_ids) << "prompt " << i;
    EXPECT_EQ(got[i].finish_reason, want[i].finish_reason) << "prompt " << i;
  }
  EXPECT_EQ(want[1].finish_reason, "stop");
  EXPECT_EQ(want[0].graph_steps, 0);
  EXPECT_EQ(got[0].decode_steps, want[0].decode_steps);
  // One op-by-op step per row count (the warm-up); the recording's own run is a replay.
  EXPECT_GE(got[0].graph_steps, got[0].decode_steps / 2);
  EXPECT_LT(got[0].graph_steps, got[0].decode_steps);
  ASSERT_EQ(graphed.logits.size(), eager.logits.size());
  for (size_t step = 0; step < eager.logits.size(); ++step) {
    EXPECT_EQ(graphed.rows[step], eager.rows[step]) << "step " << step;
    ASSERT_EQ(graphed.logits[step].size(), eager.logits[step].size()) << "step " << step;
    EXPECT_EQ(0, std::memcmp(graphed.logits[step].data(), eager.logits[step].data(),
                             eager.logits[step].size() * sizeof(float)))
        << "step " << step;
  }
}

TEST_F(GpuGenerate, GraphedDecodeStepsMatchOpByOpBitForBit) { expect_graphed_steps_match_op_by_op("qwen3_toy"); }

// The MoE toy's decode steps are recorded too: its experts run through moe_decode_experts, which reads nothing back
// to the host.
TEST_F(GpuGenerate, MoeGraphedDecodeStepsMatchOpByOpBitForBit) {
  expect_graphed_steps_match_op_by_op("qwen3_moe_toy");
}

// Greedy steps run several between reads (each feeding its ids to the next on the device, the run recorded as one
// graph) give the ids of one read a step, with graphs and without: a stop token ends one prompt inside a run, and
// max_new_tokens (24) cuts the last run short. A run's shape (rows, steps) runs op by op the first time and is
// recorded the second, so with 4 and 5 steps a read some runs replayed a graph; 16 steps never repeat a shape.
TEST_F(GpuGenerate, SeveralStepsBetweenReadsGiveTheSameIds) {
  auto model = graph_test_toy();
  const std::vector<std::vector<int64_t>>& prompts = kGraphTestPrompts;
  GenerateOptions options;
  options.max_new_tokens = 24;
  const std::vector<Generation> unstopped = Generator(*model, options).generate(prompts, 0);
  options.stop_token_ids = {unstopped[1].token_ids[4]};
  for (bool graphs : {false, true}) {
    options.cuda_graphs = graphs;
    options.steps_per_sync = 1;
    const std::vector<Generation> want = Generator(*model, options).generate(prompts, 0);
    EXPECT_EQ(want[1].finish_reason, "stop");
    for (int64_t steps : {4, 5, 16}) {
      SCOPED_TRACE(::testing::Message() << steps << " steps a read, graphs " << graphs);
      options.steps_per_sync = steps;
      const std::vector<Generation> got = Generator(*model, options).generate(prompts, 0);
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].token_ids, want[i].token_ids) << "prompt " << i;
        EXPECT_EQ(got[i].finish_reason, want[i].finish_reason) << "prompt " << i;
      }
      if (graphs && steps < 16) {
        EXPECT_GT(got[0].graph_steps, 0);
      }
    }
  }
}

// Greedy runs queued before the host has read the run before them (GreedyPipeline), from the tables that run
// advanced on the device, give the ids and finish reasons of one read a step (a logits observer keeps the
// generator reading every step), graphed and op by op, with a stop token ending one prompt inside the pipeline.
TEST_F(GpuGenerate, RunsQueuedAheadOfTheHostGiveTheIdsOfStepByStepReads) {
  auto model = graph_test_toy();
  const std::vector<std::vector<int64_t>>& prompts = kGraphTestPrompts;
  GenerateOptions options;
  options.max_new_tokens = 24;
  options.stop_token_ids = {Generator(*model, options).generate(prompts, 0)[1].token_ids[4]};
  for (bool graphs : {false, true})
    for (int64_t steps : {1, 4}) {
      SCOPED_TRACE(::testing::Message() << steps << " steps a run, graphs " << graphs);
      options.cuda_graphs = graphs;
      options.steps_per_sync = steps;
      Generator read_every_step(*model, options);
      read_every_step.set_logits_observer([](const std::vector<int64_t>&, const Tensor&) {});
      const std::vector<Generation> want = read_every_step.generate(prompts, 0);
      const std::vector<Generation> got = Generator(*model, options).generate(prompts, 0);
      EXPECT_EQ(want[1].finish_reason, "stop");
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].token_ids, want[i].token_ids) << "prompt " << i;
        EXPECT_EQ(got[i].finish_reason, want[i].finish_reason) << "prompt " << i;
      }
      if (graphs) {
        EXPECT_GT(got[0].graph_steps, got[0].decode_steps / 2);
      }
    }
}

// VEOMNI_OVERLAP_LAUNCHES=0 while it lives (read when a decode step opens its OverlappedLaunches scope); unset again
// at its end, also when an assertion ends the test early.
struct SerialLaunches {
  SerialLaunches() { setenv("VEOMNI_OVERLAP_LAUNCHES", "0", 1); }
  ~SerialLaunches() { unsetenv("VEOMNI_OVERLAP_LAUNCHES"); }
  SerialLaunches(const SerialLaunches&) = delete;
  SerialLaunches& operator=(const SerialLaunches&) = delete;
};

// VEOMNI_DECODE_LAYER_KERNEL=1 for a test's scope: a run of dense layers' decode step runs as one persistent kernel.
struct DecodeLayerKernelOn {
  DecodeLayerKernelOn() { setenv("VEOMNI_DECODE_LAYER_KERNEL", "1", 1); }
  ~DecodeLayerKernelOn() { unsetenv("VEOMNI_DECODE_LAYER_KERNEL"); }
  DecodeLayerKernelOn(const DecodeLayerKernelOn&) = delete;
  DecodeLayerKernelOn& operator=(const DecodeLayerKernelOn&) = delete;
};

// VEOMNI_DECODE_LAYER_KERNEL=0 for a test's scope: a batch-1 step's dense layers run as the ops in turn, not as the
// clustered kernel that is their default where it fits.
struct OpsInTurnOn {
  OpsInTurnOn() { setenv("VEOMNI_DECODE_LAYER_KERNEL", "0", 1); }
  ~OpsInTurnOn() { unsetenv("VEOMNI_DECODE_LAYER_KERNEL"); }
  OpsInTurnOn(const OpsInTurnOn&) = delete;
  OpsInTurnOn& operator=(const OpsInTurnOn&) = delete;
};

// Generates with a bf16 toy of `config` twice, the second time inside a Switch's scope (an environment switch): the
// logits are the same bits at every step, op by op and from graphs.
template <typename Switch>
void expect_logits_unchanged_by(const ModelConfig& config, uint64_t seed) {
  auto model = toy_on(config, Device::cuda(0), DType::BF16);
  model->init_weights(seed);
  const std::vector<std::vector<int64_t>> prompts = {{5, 17, 3}, {9, 2, 44, 61, 8, 30, 12}};
  GenerateOptions options;
  options.max_new_tokens = 12;
  for (const bool graphs : {false, true}) {
    options.cuda_graphs = graphs;
    StepLog plain, switched;
    generate_logged(*model, prompts, options, plain);
    {
      const Switch on;
      generate_logged(*model, prompts, options, switched);
    }
    ASSERT_EQ(switched.logits.size(), plain.logits.size());
    for (size_t step = 0; step < plain.logits.size(); ++step) {
      ASSERT_EQ(switched.logits[step].size(), plain.logits[step].size());
      EXPECT_EQ(0, std::memcmp(switched.logits[step].data(), plain.logits[step].data(),
                               plain.logits[step].size() * sizeof(float)))
          << "graphs " << graphs << " step " << step;
    }
  }
}

ModelConfig toy_config() {
  ModelConfig config = load_model_config(std::string(VEOMNI_SOURCE_DIR) + "/configs/model_configs/qwen3_toy");
  config.initializer_range = 0.2;
  return config;
}

// A decode step's kernels launch early (OverlappedLaunches: each starts while the one before runs and waits for it
// before reading its output); with VEOMNI_OVERLAP_LAUNCHES=0 they launch one after the other. Op by op and from
// graphs, both give the same logits bit for bit.
TEST_F(GpuGenerate, OverlappedDecodeLaunchesMatchSerialLaunchesBitForBit) {
  expect_logits_unchanged_by<SerialLaunches>(toy_config(), 29);
}

// Generation with each dense layer's decode step as one persistent kernel (the toy with head_dim 64, which the
// kernel takes) gives the logits of the ops in turn bit for bit, op by op and from graphs.
TEST_F(GpuGenerate, DecodeLayerKernelMatchesTheOpsBitForBit) {
  ModelConfig config = toy_config();
  config.head_dim = 64;
  expect_logits_unchanged_by<DecodeLayerKernelOn>(config, 31);
}

// Batch-1 generation with the clustered decode kernel (the default for a toy with head_dim 128 and a hidden size of
// 128, which it takes) makes the greedy tokens of the ops in turn (VEOMNI_DECODE_LAYER_KERNEL=0), its logits within 2%
// of the largest, op by op and from graphs (its o_proj and down_proj sums run in another order, so not the same bits).
TEST_F(GpuGenerate, ClusteredDecodeKernelIsCloseToTheOps) {
  ModelConfig config = toy_config();
  config.head_dim = 128;
  config.hidden_size = 128;
  auto model = toy_on(config, Device::cuda(0), DType::BF16);
  model->init_weights(37);
  const std::vector<std::vector<int64_t>> prompts = {{9, 2, 44, 61, 8, 30, 12}};
  GenerateOptions options;
  options.max_new_tokens = 12;
  for (const bool graphs : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "graphs " << graphs);
    options.cuda_graphs = graphs;
    StepLog plain, clustered;
    std::vector<Generation> want;
    {
      const OpsInTurnOn off;
      want = generate_logged(*model, prompts, options, plain);
    }
    const std::vector<Generation> got = generate_logged(*model, prompts, options, clustered);
    EXPECT_EQ(got[0].token_ids, want[0].token_ids);
    ASSERT_EQ(clustered.logits.size(), plain.logits.size());
    bool other_bits = false;  // the clustered kernel ran: its sums' order shows in the logits' last bits
    for (size_t step = 0; step < plain.logits.size(); ++step) {
      ASSERT_EQ(clustered.logits[step].size(), plain.logits[step].size());
      float worst = 0, scale = 0;
      for (size_t i = 0; i < plain.logits[step].size(); ++i) {
        worst = std::max(worst, std::fabs(clustered.logits[step][i] - plain.logits[step][i]));
        scale = std::max(scale, std::fabs(plain.logits[step][i]));
      }
      EXPECT_LE(worst, 0.02f * scale) << "step " << step;
      other_bits = other_bits || worst > 0;
    }
    EXPECT_TRUE(other_bits);
  }
}

// The [2, N] table attention_kv_cache reads (slots, then kv lengths), on `device`.
Tensor cache_rows(const std::vector<int32_t>& slots, const std::vector<int32_t>& kv_lens, Device device) {
  std::vector<int32_t> rows(slots);
  rows.insert(rows.end(), kv_lens.begin(), kv_lens.end());
  return Tensor::from_vector(rows, {2, static_cast<int64_t>(slots.size())}).to(device);
}

// The kernel against the CPU op over caches of cache_len rows: 12 is one split of the sequence (the kernel writes the
// output directly), 70 five splits of 16 keys, 300 nineteen (a second kernel merges the splits).
void expect_attention_kv_cache_matches_cpu(int64_t cache_len, const std::vector<int32_t>& kv_lens, int64_t hq = 8,
                                           int64_t hkv = 2, int64_t d = 128) {
  std::mt19937 rng(9);
  const int64_t batch = 3, n = 4;
  const std::vector<int32_t> slots = {2, 0, 1, 2};
  const Tensor q = gpu_test::random_f32({n, hq, d}, rng);
  const Tensor k = gpu_test::random_f32({batch, cache_len, hkv, d}, rng);
  const Tensor v = gpu_test::random_f32({batch, cache_len, hkv, d}, rng);
  for (DType dtype : {DType::F32, DType::BF16}) {
    // The CPU reference reads the same (rounded) inputs.
    const Tensor qr = q.to_dtype(dtype).to_dtype(DType::F32), kr = k.to_dtype(dtype).to_dtype(DType::F32),
                 vr = v.to_dtype(dtype).to_dtype(DType::F32);
    Tensor want = Tensor::empty({n, hq, d}, DType::F32);
    ops::attention_kv_cache(qr, kr, vr, cache_rows(slots, kv_lens, Device::cpu()), 0.1f, want);
    Tensor out = Tensor::empty({n, hq, d}, dtype, gpu_test::gpu());
    ops::attention_kv_cache(q.to_dtype(dtype).to(gpu_test::gpu()), k.to_dtype(dtype).to(gpu_test::gpu()),
                            v.to_dtype(dtype).to(gpu_test::gpu()), cache_rows(slots, kv_lens, gpu_test::gpu()), 0.1f,
                            out);
    const std::vector<float> got = out.to(Device::cpu()).to_dtype(DType::F32).to_float_vector();
    const std::vector<float> ref = want.to_float_vector();
    double worst = 0, scale = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(got[i] - ref[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(ref[i])));
    }
    EXPECT_LE(worst, gpu_test::rtol_for(dtype) * scale)
        << dtype_name(dtype) << " cache_len " << cache_len << " heads " << hq << "/" << hkv << " head_dim " << d;
  }
}

TEST_F(GpuGenerate, AttentionKvCacheMatchesCpu) {
  expect_attention_kv_cache_matches_cpu(12, {12, 1, 3, 7});
  expect_attention_kv_cache_matches_cpu(70, {70, 1, 3, 37});
}

TEST_F(GpuGenerate, AttentionKvCacheSplitAcrossBlocksMatchesCpu) {
  expect_attention_kv_cache_matches_cpu(300, {300, 1, 65, 129});
  // 16 query heads over 8 kv heads and 4 rows: 16-key splits would make too many blocks, so the splits are 64 keys.
  expect_attention_kv_cache_matches_cpu(2000, {2000, 1, 65, 1500}, 16, 8);
}

// Every instance family of the grouped kernel (head_dim 64, 128, 256; 1, 2, 4, 8 query heads per kv head) and the
// generic kernel's shapes (a group of 3, head_dim 48, eight heads of 256), one split and several.
TEST_F(GpuGenerate, AttentionKvCacheEveryHeadLayoutMatchesCpu) {
  struct Layout {
    int64_t hq, hkv, d;
  };
  for (const Layout& l : {Layout{16, 8, 128}, Layout{8, 8, 64}, Layout{32, 4, 128}, Layout{4, 2, 256},
                          Layout{16, 2, 64}, Layout{6, 2, 48}, Layout{16, 2, 256}}) {
    expect_attention_kv_cache_matches_cpu(12, {12, 1, 3, 7}, l.hq, l.hkv, l.d);
    expect_attention_kv_cache_matches_cpu(70, {70, 1, 3, 37}, l.hq, l.hkv, l.d);
    expect_attention_kv_cache_matches_cpu(300, {300, 1, 65, 129}, l.hq, l.hkv, l.d);
  }
}

// A row outside the cache cannot be reported without waiting for the device: its output is NaN, the others' are not.
TEST_F(GpuGenerate, AttentionKvCacheRowOutsideTheCacheIsNan) {
  std::mt19937 rng(4);
  for (int64_t cache_len : {8, 200}) {
    for (int64_t d : {16, 128}) {  // the generic kernel, then the grouped one
    const Tensor q = gpu_test::to_gpu(gpu_test::random_f32({2, 2, d}, rng));
    const Tensor k = gpu_test::to_gpu(gpu_test::random_f32({1, cache_len, 1, d}, rng));
    Tensor out = Tensor::empty({2, 2, d}, DType::F32, gpu_test::gpu());
    ops::attention_kv_cache(q, k, k, cache_rows({0, 0}, {3, static_cast<int32_t>(cache_len) + 1}, gpu_test::gpu()),
                            1.0f, out);
    const std::vector<float> got = out.to(Device::cpu()).to_float_vector();
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(std::isnan(got[i]), i >= got.size() / 2)
          << "element " << i << " cache_len " << cache_len << " head_dim " << d;
    }
  }
}

// The fused attention inputs of a cached step against the CPU op, f32 and bf16, head_dim 128 and a toy's 24 (the
// shared-memory path is the same for every head size; 24 leaves lanes idle).
TEST_F(GpuGenerate, QkvNormRopeCacheWriteMatchesCpu) {
  std::mt19937 rng(12);
  for (int64_t d : {128, 24}) {
    const int64_t s = 5, hq = 8, hkv = 2, batch = 2, cache_len = 6;
    const Tensor qkv = gpu_test::random_f32({s, (hq + 2 * hkv) * d}, rng);
    const Tensor wq = gpu_test::random_f32({d}, rng), wk = gpu_test::random_f32({d}, rng);
    const Tensor cos = gpu_test::random_f32({s, d}, rng), sin = gpu_test::random_f32({s, d}, rng);
    const std::vector<int32_t> dest = {3, 11, 0, 7, 5};
    const Tensor cache0 = gpu_test::random_f32({batch, cache_len, hkv, d}, rng);
    for (DType dtype : {DType::F32, DType::BF16}) {
      Tensor q = Tensor::empty({s, hq, d}, DType::F32), k = Tensor::empty({s, hkv, d}, DType::F32);
      Tensor v = Tensor::empty({s, hkv, d}, DType::F32);
      Tensor k_cache = gpu_test::representable(cache0, dtype), v_cache = gpu_test::representable(cache0, dtype);
      ops::qkv_norm_rope_cache_write(gpu_test::representable(qkv, dtype), gpu_test::representable(wq, dtype),
                                     gpu_test::representable(wk, dtype), 1e-6f, cos, sin,
                                     Tensor::from_vector(dest, {s}), q, k, v, k_cache, v_cache);
      Tensor gq = Tensor::empty({s, hq, d}, dtype, gpu_test::gpu());
      Tensor gk = Tensor::empty({s, hkv, d}, dtype, gpu_test::gpu());
      Tensor gv = Tensor::empty({s, hkv, d}, dtype, gpu_test::gpu());
      Tensor gk_cache = gpu_test::to_gpu(cache0, dtype), gv_cache = gpu_test::to_gpu(cache0, dtype);
      ops::qkv_norm_rope_cache_write(gpu_test::to_gpu(qkv, dtype), gpu_test::to_gpu(wq, dtype),
                                     gpu_test::to_gpu(wk, dtype), 1e-6f, cos.to(gpu_test::gpu()),
                                     sin.to(gpu_test::gpu()), Tensor::from_vector(dest, {s}).to(gpu_test::gpu()), gq,
                                     gk, gv, gk_cache, gv_cache);
      const double rtol = gpu_test::rtol_for(dtype);
      EXPECT_TRUE(gpu_test::close_to(gq, q, rtol)) << dtype_name(dtype) << " q, d " << d;
      EXPECT_TRUE(gpu_test::close_to(gk, k, rtol)) << dtype_name(dtype) << " k, d " << d;
      EXPECT_TRUE(gpu_test::close_to(gv, v, rtol)) << dtype_name(dtype) << " v, d " << d;
      EXPECT_TRUE(gpu_test::close_to(gk_cache, k_cache, rtol)) << dtype_name(dtype) << " k_cache, d " << d;
      EXPECT_TRUE(gpu_test::close_to(gv_cache, v_cache, rtol)) << dtype_name(dtype) << " v_cache, d " << d;
    }
  }
}

TEST_F(GpuGenerate, KvCacheWriteMatchesCpu) {
  std::mt19937 rng(6);
  const int64_t batch = 3, cache_len = 5, hkv = 2, d = 64;
  const std::vector<int32_t> dest = {14, 0, 7, 3};
  const Tensor rows = gpu_test::random_f32({4, hkv, d}, rng);
  const Tensor initial = gpu_test::random_f32({batch, cache_len, hkv, d}, rng);
  for (DType dtype : {DType::F32, DType::BF16}) {
    Tensor want = gpu_test::representable(initial, dtype);
    ops::kv_cache_write(gpu_test::representable(rows, dtype), Tensor::from_vector(dest, {4}), want);
    Tensor got = gpu_test::to_gpu(initial, dtype);
    ops::kv_cache_write(gpu_test::to_gpu(rows, dtype), Tensor::from_vector(dest, {4}).to(gpu_test::gpu()), got);
    EXPECT_TRUE(gpu_test::bitwise_equal(gpu_test::to_host(got), want)) << dtype_name(dtype);
  }
}

TEST_F(GpuGenerate, ArgmaxRowsMatchesCpu) {
  std::mt19937 rng(8);
  const int64_t n = 5, vocab = 151936;
  Tensor x = gpu_test::random_f32({n, vocab}, rng);
  float* p = x.data<float>();
  p[0 * vocab + 7] = p[0 * vocab + 90000] = 5.0f;  // a tie: the lower index
  p[1 * vocab + vocab - 1] = 5.0f;                 // the last column
  p[2 * vocab + 3] = std::nanf("");                // NaN wins, as torch.argmax
  p[2 * vocab + 100] = 5.0f;
  p[3 * vocab + 100000] = std::nanf("");  // two NaNs in different chunks of the GPU's first pass: the lower index
  p[3 * vocab + 50000] = std::nanf("");
  p[4 * vocab + 151000] = p[4 * vocab + 2] = 7.0f;  // a tie between the first and the last chunk
  for (DType dtype : {DType::F32, DType::BF16}) {
    const Tensor xr = gpu_test::representable(x, dtype);
    Tensor want = Tensor::empty({n}, DType::I64);
    ops::argmax_rows(xr, want);
    Tensor got = Tensor::empty({n}, DType::I64, gpu_test::gpu());
    ops::argmax_rows(gpu_test::to_gpu(x, dtype), got);
    const Tensor host = got.to(Device::cpu());
    for (int64_t r = 0; r < n; ++r)
      EXPECT_EQ(host.data<int64_t>()[r], want.data<int64_t>()[r]) << dtype_name(dtype) << " row " << r;
    EXPECT_EQ(want.data<int64_t>()[0], 7);
    EXPECT_EQ(want.data<int64_t>()[1], vocab - 1);
    EXPECT_EQ(want.data<int64_t>()[2], 3);
    EXPECT_EQ(want.data<int64_t>()[3], 50000);
    EXPECT_EQ(want.data<int64_t>()[4], 2);
  }
  // A row narrower than one chunk: the first pass writes the ids itself.
  const Tensor narrow = gpu_test::random_f32({3, 100}, rng);
  Tensor want = Tensor::empty({3}, DType::I64);
  ops::argmax_rows(narrow, want);
  Tensor got = Tensor::empty({3}, DType::I64, gpu_test::gpu());
  ops::argmax_rows(gpu_test::to_gpu(narrow), got);
  EXPECT_EQ(got.to(Device::cpu()).to_float_vector(), want.to_float_vector());
}

// A row's last block to finish merges its chunks, counting on a per-row count that it resets: calls one after the
// other (and replays of a recorded step) find it at zero. Past 1,024 rows a second kernel merges instead.
TEST_F(GpuGenerate, ArgmaxRowsMergesInTheLastBlockAgainAndAgain) {
  std::mt19937 rng(9);
  for (const int64_t n : {3, 1030}) {
    SCOPED_TRACE(::testing::Message() << n << " rows");
    const Tensor x = gpu_test::random_f32({n, 5000}, rng);  // three chunks a row
    Tensor want = Tensor::empty({n}, DType::I64);
    ops::argmax_rows(x, want);
    const Tensor x_gpu = gpu_test::to_gpu(x);
    for (int call = 0; call < 3; ++call) {
      Tensor got = Tensor::empty({n}, DType::I64, gpu_test::gpu());
      ops::argmax_rows(x_gpu, got);
      EXPECT_EQ(got.to(Device::cpu()).to_float_vector(), want.to_float_vector()) << "call " << call;
    }
  }
}

}  // namespace
