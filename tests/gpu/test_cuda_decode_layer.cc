// GPU tests of ops::dense_decode_layers' persistent kernel (VEOMNI_DECODE_LAYER_KERNEL=1; called directly here): a
// run of dense decoder layers' decode step in one launch gives the bits of the ops it replaces run one after the other
// (h, and the keys and values written into every layer's caches), for Qwen3-0.6B's layers and toy layers of every
// head layout it takes, one to four rows over caches of one split and of many, a row outside the cache, every
// layout of its weight buffers, runs longer than one launch takes; and runs launched early and replayed from a CUDA
// graph. The clustered kernel (the default where it fits) runs its sums on the tensor cores in another order: its h
// and the caches it writes are checked against the ops' within a tolerance.
#include <functional>
#include <random>
#include <string>

#include "gpu_test_util.h"
#include "kernels/cuda/decode_layer.h"
#include "kernels/cuda/decode_layers_clustered.h"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/tensor_map.h"
#include "kernels/decode_ops.h"
#include "kernels/ops.h"
#include "kernels/overlapped_launches.h"
#include "kernels/step_graph.h"

using namespace veomni;
using namespace veomni::gpu_test;

namespace {

class CudaDecodeLayer : public CudaTest {};

struct LayerShape {
  int64_t hidden, q_heads, kv_heads, head_dim, intermediate;
};

// Weights of small values (a few layers' residual stream stays in range), bf16 on the GPU.
ops::DenseDecodeLayer random_layer(const LayerShape& s, std::mt19937& rng) {
  auto weight = [&](Shape shape, float bound) { return to_gpu(random_f32(shape, rng, -bound, bound), DType::BF16); };
  ops::DenseDecodeLayer layer;
  layer.input_norm = weight({s.hidden}, 1.0f);
  layer.input_norm_eps = 1e-6f;
  layer.qkv = weight({(s.q_heads + 2 * s.kv_heads) * s.head_dim, s.hidden}, 0.05f);
  layer.q_norm = weight({s.head_dim}, 1.0f);
  layer.k_norm = weight({s.head_dim}, 1.0f);
  layer.qk_norm_eps = 1e-6f;
  layer.q_heads = s.q_heads;
  layer.kv_heads = s.kv_heads;
  layer.head_dim = s.head_dim;
  layer.scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  layer.o_proj = weight({s.hidden, s.q_heads * s.head_dim}, 0.05f);
  layer.post_attention_norm = weight({s.hidden}, 1.0f);
  layer.post_attention_norm_eps = 1e-6f;
  layer.gate_up = weight({2 * s.intermediate, s.hidden}, 0.05f);
  layer.down = weight({s.hidden, s.intermediate}, 0.05f);
  return layer;
}

// A decode step of kv_lens.size() rows, row r in cache slot r, its new key at position kv_lens[r] - 1 (a length of
// 0 puts the row outside the cache: its write is skipped and its attention is NaN).
struct Step {
  Tensor cos, sin, write_rows, cache_rows;
};

Step random_step(const std::vector<int32_t>& kv_lens, int64_t capacity, int64_t head_dim, std::mt19937& rng) {
  const int64_t m = static_cast<int64_t>(kv_lens.size());
  std::vector<int32_t> dest, rows;
  for (int64_t r = 0; r < m; ++r) {
    dest.push_back(kv_lens[r] >= 1 ? static_cast<int32_t>(r * capacity + kv_lens[r] - 1) : -1);
    rows.push_back(static_cast<int32_t>(r));
  }
  rows.insert(rows.end(), kv_lens.begin(), kv_lens.end());
  return {random_f32({m, head_dim}, rng).to(gpu()), random_f32({m, head_dim}, rng).to(gpu()),
          Tensor::from_vector(dest, {m}).to(gpu()), Tensor::from_vector(rows, {2, m}).to(gpu())};
}

// The ops the layer stands for, in turn (the specification of ops::dense_decode_layers).
void ops_in_turn(const ops::DenseDecodeLayer& l, const Step& step, Tensor& k_cache, Tensor& v_cache, Tensor& h) {
  const int64_t m = h.dim(0), hq = l.q_heads, hkv = l.kv_heads, d = l.head_dim;
  Tensor qkv = Tensor::empty({m, l.qkv.dim(0)}, DType::BF16, gpu());
  ops::rmsnorm_matmul(h, l.input_norm, l.input_norm_eps, l.qkv, qkv);
  Tensor q = Tensor::empty({m, hq, d}, DType::BF16, gpu());
  Tensor k = Tensor::empty({m, hkv, d}, DType::BF16, gpu()), v = Tensor::empty({m, hkv, d}, DType::BF16, gpu());
  ops::qkv_norm_rope_cache_write(qkv, l.q_norm, l.k_norm, l.qk_norm_eps, step.cos, step.sin, step.write_rows, q, k, v,
                                 k_cache, v_cache);
  Tensor attention = Tensor::empty({m, hq, d}, DType::BF16, gpu());
  ops::attention_kv_cache(q, k_cache, v_cache, step.cache_rows, l.scale, attention);
  ops::matmul(attention.view({m, hq * d}), false, l.o_proj, true, h, 1.0f, 1.0f);
  Tensor act = Tensor::empty({m, l.gate_up.dim(0) / 2}, DType::BF16, gpu());
  ops::rmsnorm_matmul_swiglu(h, l.post_attention_norm, l.post_attention_norm_eps, l.gate_up, act);
  ops::matmul(act, false, l.down, true, h, 1.0f, 1.0f);
}

// Layer i's caches, each a copy of cache0.
std::vector<Tensor> copies(const Tensor& cache0, size_t layers) {
  std::vector<Tensor> caches;
  for (size_t i = 0; i < layers; ++i) caches.push_back(cache0.clone());
  return caches;
}

// The kernel against the ops in turn over `layers` layers of shape s, from the same h and caches: h and every cache
// the same bits.
void expect_kernel_matches_ops(const LayerShape& s, const std::vector<int32_t>& kv_lens, int64_t capacity,
                               size_t layer_count = 2) {
  SCOPED_TRACE(fmt::format("hidden {} heads {}/{} head_dim {} intermediate {} rows {} capacity {} layers {}", s.hidden,
                           s.q_heads, s.kv_heads, s.head_dim, s.intermediate, kv_lens.size(), capacity, layer_count));
  std::mt19937 rng(31);
  std::vector<ops::DenseDecodeLayer> layers;
  for (size_t i = 0; i < layer_count; ++i) layers.push_back(random_layer(s, rng));
  const int64_t m = static_cast<int64_t>(kv_lens.size());
  const Step step = random_step(kv_lens, capacity, s.head_dim, rng);
  const Tensor h0 = to_gpu(random_f32({m, s.hidden}, rng), DType::BF16);
  const Tensor cache0 = to_gpu(random_f32({m, capacity, s.kv_heads, s.head_dim}, rng), DType::BF16);
  Tensor want_h = h0.clone();
  std::vector<Tensor> want_k = copies(cache0, layer_count), want_v = copies(cache0, layer_count);
  for (size_t i = 0; i < layer_count; ++i) ops_in_turn(layers[i], step, want_k[i], want_v[i], want_h);
  Tensor h = h0.clone();
  std::vector<Tensor> k_caches = copies(cache0, layer_count), v_caches = copies(cache0, layer_count);
  ASSERT_TRUE(ops::cuda::dense_decode_layers_kernel_fits(layers, k_caches, v_caches, h));
  ops::cuda::dense_decode_layers(layers, step.cos, step.sin, step.write_rows, step.cache_rows, k_caches, v_caches, h);
  EXPECT_TRUE(bitwise_equal(h, want_h));
  for (size_t i = 0; i < layer_count; ++i) {
    EXPECT_TRUE(bitwise_equal(k_caches[i], want_k[i])) << "layer " << i;
    EXPECT_TRUE(bitwise_equal(v_caches[i], want_v[i])) << "layer " << i;
  }
  const std::vector<float> got = to_host(h).to_float_vector();
  for (int64_t r = 0; r < m; ++r)
    EXPECT_EQ(std::isnan(got[r * s.hidden]), kv_lens[r] == 0) << "row " << r << " kv length " << kv_lens[r];
}

const LayerShape kQwen3_0p6b{1024, 16, 8, 128, 3072};

// A layer of shape s with m rows, for the plan's questions.
int buffers_for(const LayerShape& s, int64_t m) {
  std::mt19937 rng(1);
  return ops::cuda::dense_decode_layers_buffers(random_layer(s, rng),
                                                Tensor::empty({m, s.hidden}, DType::BF16, gpu()));
}

// Qwen3-0.6B's layers: one row (the batch-1 step), three and four rows over a cache of 300 positions (19 splits for
// one row, fewer and longer for more), rows at the cache's first and last positions; a full cache merges 19 splits.
// One row streams the weights through three buffers (o_proj and down share one), three and four rows through two; five
// rows are past the skinny GEMM's rows, so the kernel has no plan for them; a toy layer streams through four.
TEST_F(CudaDecodeLayer, Qwen3LayersGiveTheOpsBits) {
  EXPECT_EQ(buffers_for(kQwen3_0p6b, 1), 3);
  EXPECT_EQ(buffers_for(kQwen3_0p6b, 3), 2);
  EXPECT_EQ(buffers_for(kQwen3_0p6b, 4), 2);
  EXPECT_EQ(buffers_for(kQwen3_0p6b, 5), 0);
  EXPECT_EQ(buffers_for(LayerShape{256, 4, 1, 64, 512}, 2), 4);
  expect_kernel_matches_ops(kQwen3_0p6b, {129}, 300, 3);
  expect_kernel_matches_ops(kQwen3_0p6b, {300}, 300);  // 19 splits: the merge past its registers' 16
  expect_kernel_matches_ops(kQwen3_0p6b, {300, 1, 37}, 300);
  expect_kernel_matches_ops(kQwen3_0p6b, {300, 1, 37, 129}, 300);
}

// Every head layout the kernel has (head_dim 64 and 128; 1, 2, 4 and 8 query heads per kv head), over a cache of
// one split (the attention writes its output directly) and of several; widths that leave blocks without columns.
TEST_F(CudaDecodeLayer, EveryHeadLayoutGivesTheOpsBits) {
  for (const LayerShape& s : {LayerShape{256, 4, 1, 64, 512}, LayerShape{512, 8, 1, 128, 1024},
                              LayerShape{256, 2, 2, 128, 768}, LayerShape{128, 4, 2, 64, 256}}) {
    expect_kernel_matches_ops(s, {12, 3}, 12);
    expect_kernel_matches_ops(s, {70, 5, 33}, 70);
  }
}

// A row outside the cache (kv length 0): its write is skipped, its h row is NaN, the other rows are unaffected.
TEST_F(CudaDecodeLayer, RowOutsideTheCacheIsNanAndLeavesTheOthers) {
  expect_kernel_matches_ops(kQwen3_0p6b, {40, 0, 7}, 64);
}

// A run longer than one launch takes (32 layers): the launches follow one another on the same counters.
TEST_F(CudaDecodeLayer, RunLongerThanOneLaunchGivesTheOpsBits) {
  expect_kernel_matches_ops(LayerShape{128, 4, 2, 64, 256}, {20, 9}, 24, 35);
}

using LayersLaunch = std::function<void(Tensor& h, std::vector<Tensor>& k_caches, std::vector<Tensor>& v_caches)>;

// Records `launch` over `layer_count` layers, after the copies that set h to h0 and every cache to cache0, into a CUDA
// graph with its kernels launched early (OverlappedLaunches), and replays the graph three times: each replay gives
// want_h and the caches want_k and want_v bit for bit.
void expect_graph_replays_give(const LayersLaunch& launch, size_t layer_count, const Tensor& h0, const Tensor& cache0,
                               const Tensor& want_h, const std::vector<Tensor>& want_k,
                               const std::vector<Tensor>& want_v) {
  Tensor graphed = h0.clone();
  std::vector<Tensor> graphed_k = copies(cache0, layer_count), graphed_v = copies(cache0, layer_count);
  StepGraph graph;
  graph.capture(gpu(), [&] {
    const OverlappedLaunches overlapped;
    graphed.copy_from(h0);
    for (size_t i = 0; i < layer_count; ++i) {
      graphed_k[i].copy_from(cache0);
      graphed_v[i].copy_from(cache0);
    }
    launch(graphed, graphed_k, graphed_v);
  });
  for (int replay = 0; replay < 3; ++replay) {
    ops::fill_(graphed, 0.0f);
    graph.replay();
    EXPECT_TRUE(bitwise_equal(graphed, want_h)) << "replay " << replay;
    for (size_t i = 0; i < layer_count; ++i) {
      EXPECT_TRUE(bitwise_equal(graphed_k[i], want_k[i])) << "replay " << replay << " layer " << i;
      EXPECT_TRUE(bitwise_equal(graphed_v[i], want_v[i])) << "replay " << replay << " layer " << i;
    }
  }
  EXPECT_TRUE(std::isfinite(ops::sum_squares(want_h)));
}

// A run of three layers launched early after the copies that set h and the caches, and recorded into a CUDA graph:
// every replay gives the bits of the ops run one after the other. The kernel's counters are back at zero after each
// launch.
TEST_F(CudaDecodeLayer, RunLaunchedEarlyAndGraphedGivesTheSerialBits) {
  std::mt19937 rng(8);
  std::vector<ops::DenseDecodeLayer> layers;
  for (int i = 0; i < 3; ++i) layers.push_back(random_layer(kQwen3_0p6b, rng));
  const std::vector<int32_t> kv_lens{90, 3};
  const int64_t m = 2, capacity = 96;
  const Step step = random_step(kv_lens, capacity, kQwen3_0p6b.head_dim, rng);
  const Tensor h0 = to_gpu(random_f32({m, kQwen3_0p6b.hidden}, rng), DType::BF16);
  const Tensor cache0 = to_gpu(random_f32({m, capacity, kQwen3_0p6b.kv_heads, 128}, rng), DType::BF16);
  Tensor serial = h0.clone();
  std::vector<Tensor> serial_k = copies(cache0, layers.size()), serial_v = copies(cache0, layers.size());
  for (size_t i = 0; i < layers.size(); ++i) ops_in_turn(layers[i], step, serial_k[i], serial_v[i], serial);
  expect_graph_replays_give(
      [&](Tensor& h, std::vector<Tensor>& k_caches, std::vector<Tensor>& v_caches) {
        ops::cuda::dense_decode_layers(layers, step.cos, step.sin, step.write_rows, step.cache_rows, k_caches,
                                       v_caches, h);
      },
      layers.size(), h0, cache0, serial, serial_k, serial_v);
}

// ---------------------------------------------------------------- the clustered kernel

// ||got - want|| / ||want|| over the finite reference.
double relative_l2(const Tensor& got, const Tensor& want) {
  const std::vector<float> g = to_host(got).to_float_vector(), w = to_host(want).to_float_vector();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    diff += (static_cast<double>(g[i]) - w[i]) * (static_cast<double>(g[i]) - w[i]);
    norm += static_cast<double>(w[i]) * w[i];
  }
  return std::sqrt(diff / norm);
}

// The clustered kernel against the ops in turn over `layer_count` layers of shape s, one row of kv length kv_len:
// h and every layer's caches within 1% (relative L2). A kv length of 0 puts the row outside the cache: h is NaN and
// no cache is written.
void expect_clustered_close_to_ops(const LayerShape& s, int32_t kv_len, int64_t capacity, size_t layer_count = 2) {
  SCOPED_TRACE(fmt::format("hidden {} heads {}/{} intermediate {} kv length {} capacity {} layers {}", s.hidden,
                           s.q_heads, s.kv_heads, s.intermediate, kv_len, capacity, layer_count));
  std::mt19937 rng(47);
  std::vector<ops::DenseDecodeLayer> layers;
  for (size_t i = 0; i < layer_count; ++i) layers.push_back(random_layer(s, rng));
  const Step step = random_step({kv_len}, capacity, s.head_dim, rng);
  const Tensor h0 = to_gpu(random_f32({1, s.hidden}, rng), DType::BF16);
  const Tensor cache0 = to_gpu(random_f32({1, capacity, s.kv_heads, s.head_dim}, rng), DType::BF16);
  Tensor want_h = h0.clone();
  std::vector<Tensor> want_k = copies(cache0, layer_count), want_v = copies(cache0, layer_count);
  for (size_t i = 0; i < layer_count; ++i) ops_in_turn(layers[i], step, want_k[i], want_v[i], want_h);
  Tensor h = h0.clone();
  std::vector<Tensor> k_caches = copies(cache0, layer_count), v_caches = copies(cache0, layer_count);
  ASSERT_TRUE(ops::cuda::dense_decode_layers_clustered_fits(layers, k_caches, v_caches, h));
  ops::cuda::dense_decode_layers_clustered(layers, step.cos, step.sin, step.write_rows, step.cache_rows, k_caches,
                                           v_caches, h);
  if (kv_len == 0) {
    for (float x : to_host(h).to_float_vector()) ASSERT_TRUE(std::isnan(x));
    for (size_t i = 0; i < layer_count; ++i) {
      EXPECT_TRUE(bitwise_equal(k_caches[i], cache0)) << "layer " << i;
      EXPECT_TRUE(bitwise_equal(v_caches[i], cache0)) << "layer " << i;
    }
    return;
  }
  EXPECT_LT(relative_l2(h, want_h), 1e-2);
  for (size_t i = 0; i < layer_count; ++i) {
    EXPECT_LT(relative_l2(k_caches[i], want_k[i]), 1e-2) << "layer " << i;
    EXPECT_LT(relative_l2(v_caches[i], want_v[i]), 1e-2) << "layer " << i;
  }
}

// Qwen3-0.6B's layers over caches of 129 and 300 keys, the first key only, and fewer keys than a cluster has blocks.
TEST_F(CudaDecodeLayer, ClusteredKernelIsCloseToTheOps) {
  expect_clustered_close_to_ops(kQwen3_0p6b, 129, 300, 3);
  expect_clustered_close_to_ops(kQwen3_0p6b, 300, 300);
  expect_clustered_close_to_ops(kQwen3_0p6b, 1, 300);
  expect_clustered_close_to_ops(kQwen3_0p6b, 5, 8);
}

// One, two and four query heads per kv head; an MLP so narrow that most blocks own no SwiGLU column.
TEST_F(CudaDecodeLayer, ClusteredKernelTakesEveryGroupSize) {
  expect_clustered_close_to_ops(LayerShape{128, 2, 2, 128, 256}, 40, 64);
  expect_clustered_close_to_ops(LayerShape{512, 8, 4, 128, 1536}, 70, 70);
  expect_clustered_close_to_ops(LayerShape{256, 4, 1, 128, 512}, 33, 40);
}

TEST_F(CudaDecodeLayer, ClusteredKernelRowOutsideTheCacheIsNan) {
  expect_clustered_close_to_ops(kQwen3_0p6b, 0, 64);
}

// 35 layers: two launches, one after the other on the same launch counters and flagged words.
TEST_F(CudaDecodeLayer, ClusteredKernelRunLongerThanOneLaunchIsCloseToTheOps) {
  expect_clustered_close_to_ops(LayerShape{128, 4, 2, 128, 256}, 20, 24, 35);
}

// Several rows, head_dim 64, a hidden size that is not a multiple of 64, a cache of more than 2,048 positions: not the
// clustered kernel's.
TEST_F(CudaDecodeLayer, ClusteredKernelTakesOneRowOfHeadDim128Only) {
  std::mt19937 rng(3);
  auto fits = [&](const LayerShape& s, int64_t m, int64_t capacity = 16) {
    std::vector<ops::DenseDecodeLayer> layers{random_layer(s, rng)};
    std::vector<Tensor> caches{Tensor::empty({m, capacity, s.kv_heads, s.head_dim}, DType::BF16, gpu())};
    return ops::cuda::dense_decode_layers_clustered_fits(layers, caches, caches,
                                                         Tensor::empty({m, s.hidden}, DType::BF16, gpu()));
  };
  EXPECT_TRUE(fits(kQwen3_0p6b, 1));
  EXPECT_TRUE(fits(kQwen3_0p6b, 1, 2048));
  EXPECT_FALSE(fits(kQwen3_0p6b, 1, 2049));
  EXPECT_FALSE(fits(kQwen3_0p6b, 2));
  EXPECT_FALSE(fits(LayerShape{256, 4, 1, 64, 512}, 1));
  EXPECT_FALSE(fits(LayerShape{160, 2, 2, 128, 256}, 1));
}

// The tensor maps of the clustered kernel's o_proj and down slices: a box the copy engine cannot move (wider than 256
// elements) is refused on the host with the shape in the message, not encoded into a map that fails in the kernel.
TEST_F(CudaDecodeLayer, TensorMapRefusesABoxWiderThanTheCopyEngineMoves) {
  ASSERT_TRUE(ops::cuda::tensor_maps_available());
  const Tensor w = Tensor::empty({64, 1024}, DType::BF16, gpu());
  EXPECT_NO_THROW(ops::cuda::bf16_tensor_map(w.raw_data(), {1024, 64, 1}, {2048, 64 * 2048}, {256, 64, 1}));
  try {
    ops::cuda::bf16_tensor_map(w.raw_data(), {1024, 64, 1}, {2048, 64 * 2048}, {512, 64, 1});
    FAIL() << "a 512-element box was encoded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("box 512x64x1"), std::string::npos) << e.what();
  }
}

// Three layers launched early after the copies that set h and the caches, recorded into a CUDA graph: every replay
// gives the bits of a launch outside the graph (the kernel's sums run in a fixed order).
TEST_F(CudaDecodeLayer, ClusteredKernelLaunchedEarlyAndGraphedGivesItsSerialBits) {
  std::mt19937 rng(12);
  std::vector<ops::DenseDecodeLayer> layers;
  for (int i = 0; i < 3; ++i) layers.push_back(random_layer(kQwen3_0p6b, rng));
  const int64_t capacity = 96;
  const Step step = random_step({77}, capacity, kQwen3_0p6b.head_dim, rng);
  const Tensor h0 = to_gpu(random_f32({1, kQwen3_0p6b.hidden}, rng), DType::BF16);
  const Tensor cache0 = to_gpu(random_f32({1, capacity, kQwen3_0p6b.kv_heads, 128}, rng), DType::BF16);
  const LayersLaunch launch = [&](Tensor& h, std::vector<Tensor>& k_caches, std::vector<Tensor>& v_caches) {
    ops::cuda::dense_decode_layers_clustered(layers, step.cos, step.sin, step.write_rows, step.cache_rows, k_caches,
                                             v_caches, h);
  };
  Tensor serial = h0.clone();
  std::vector<Tensor> serial_k = copies(cache0, layers.size()), serial_v = copies(cache0, layers.size());
  ASSERT_TRUE(ops::cuda::dense_decode_layers_clustered_fits(layers, serial_k, serial_v, serial));
  launch(serial, serial_k, serial_v);
  expect_graph_replays_give(launch, layers.size(), h0, cache0, serial, serial_k, serial_v);
}

// Launch after launch through the same flagged words, with two inputs and two layer counts in turn: each launch gives
// the bits of its inputs' first launch, so no block ever took a sum left by the launch before (the other inputs') for
// one of its own.
TEST_F(CudaDecodeLayer, ClusteredKernelLaunchAfterLaunchTakesOnlyItsOwnSums) {
  std::mt19937 rng(21);
  std::vector<ops::DenseDecodeLayer> layers;
  for (int i = 0; i < 3; ++i) layers.push_back(random_layer(kQwen3_0p6b, rng));
  const int64_t capacity = 96;
  const Step step = random_step({77}, capacity, kQwen3_0p6b.head_dim, rng);
  const Tensor h0 = to_gpu(random_f32({1, kQwen3_0p6b.hidden}, rng), DType::BF16);
  const Tensor h1 = to_gpu(random_f32({1, kQwen3_0p6b.hidden}, rng), DType::BF16);
  const Tensor cache0 = to_gpu(random_f32({1, capacity, kQwen3_0p6b.kv_heads, 128}, rng), DType::BF16);
  auto run = [&](const Tensor& start, size_t count) {
    const std::vector<ops::DenseDecodeLayer> run_layers(layers.begin(), layers.begin() + static_cast<int64_t>(count));
    Tensor h = start.clone();
    std::vector<Tensor> k_caches = copies(cache0, count), v_caches = copies(cache0, count);
    ops::cuda::dense_decode_layers_clustered(run_layers, step.cos, step.sin, step.write_rows, step.cache_rows, k_caches,
                                             v_caches, h);
    return h;
  };
  {
    std::vector<Tensor> caches = copies(cache0, layers.size());
    Tensor h = h0.clone();
    ASSERT_TRUE(ops::cuda::dense_decode_layers_clustered_fits(layers, caches, caches, h));
  }
  const Tensor want0 = run(h0, 3), want1 = run(h1, 2);
  ASSERT_FALSE(bitwise_equal(want0, want1));
  for (int round = 0; round < 20; ++round) {
    EXPECT_TRUE(bitwise_equal(run(h0, 3), want0)) << "round " << round;
    EXPECT_TRUE(bitwise_equal(run(h1, 2), want1)) << "round " << round;
  }
}

}  // namespace
