// GPU tests of ops::dense_decode_layers' persistent kernel (VEOMNI_DECODE_LAYER_KERNEL=1; called directly here): a
// run of dense decoder layers' decode step in one launch gives the bits of the ops it replaces run one after the other
// (h, and the keys and values written into every layer's caches), for Qwen3-0.6B's layers and toy layers of every
// head layout it takes, one to eight rows over caches of one split and of many, a row outside the cache, every
// layout of its weight buffers, runs longer than one launch takes; and runs launched early and replayed from a CUDA
// graph.
#include <random>

#include "gpu_test_util.h"
#include "kernels/cuda/decode_layer.h"
#include "kernels/cuda/ops_cuda.h"
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

// Qwen3-0.6B's layers: one row (the batch-1 step), three and eight rows over a cache of 300 positions (19 splits for
// one row, fewer and longer for more), rows at the cache's first and last positions; a full cache merges 19 splits. One row streams the weights
// through three buffers (o_proj and down share one), three rows through two, eight rows through two of one block an
// SM; a toy layer through four.
TEST_F(CudaDecodeLayer, Qwen3LayersGiveTheOpsBits) {
  EXPECT_EQ(buffers_for(kQwen3_0p6b, 1), 3);
  EXPECT_EQ(buffers_for(kQwen3_0p6b, 3), 2);
  EXPECT_EQ(buffers_for(kQwen3_0p6b, 8), 2);
  EXPECT_EQ(buffers_for(LayerShape{256, 4, 1, 64, 512}, 2), 4);
  expect_kernel_matches_ops(kQwen3_0p6b, {129}, 300, 3);
  expect_kernel_matches_ops(kQwen3_0p6b, {300}, 300);  // 19 splits: the merge past its registers' 16
  expect_kernel_matches_ops(kQwen3_0p6b, {300, 1, 37}, 300);
  expect_kernel_matches_ops(kQwen3_0p6b, {300, 1, 37, 129, 64, 17, 200, 2}, 300);
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

// A run of three layers launched early (OverlappedLaunches) after the copies that set h and the caches, and recorded
// into a CUDA graph: every replay gives the bits of the ops run one after the other. The kernel's counters are back
// at zero after each launch.
TEST_F(CudaDecodeLayer, RunLaunchedEarlyAndGraphedGivesTheSerialBits) {
  std::mt19937 rng(8);
  std::vector<ops::DenseDecodeLayer> layers;
  for (int i = 0; i < 3; ++i) layers.push_back(random_layer(kQwen3_0p6b, rng));
  const std::vector<int32_t> kv_lens{90, 3};
  const int64_t m = 2, capacity = 96;
  const Step step = random_step(kv_lens, capacity, kQwen3_0p6b.head_dim, rng);
  const Tensor h0 = to_gpu(random_f32({m, kQwen3_0p6b.hidden}, rng), DType::BF16);
  const Tensor cache0 = to_gpu(random_f32({m, capacity, kQwen3_0p6b.kv_heads, 128}, rng), DType::BF16);
  auto run = [&](Tensor& h, std::vector<Tensor>& k_caches, std::vector<Tensor>& v_caches) {
    h.copy_from(h0);
    for (size_t i = 0; i < layers.size(); ++i) {
      k_caches[i].copy_from(cache0);
      v_caches[i].copy_from(cache0);
    }
    ops::cuda::dense_decode_layers(layers, step.cos, step.sin, step.write_rows, step.cache_rows, k_caches, v_caches,
                                   h);
  };
  Tensor serial = h0.clone();
  std::vector<Tensor> serial_k = copies(cache0, layers.size()), serial_v = copies(cache0, layers.size());
  for (size_t i = 0; i < layers.size(); ++i) ops_in_turn(layers[i], step, serial_k[i], serial_v[i], serial);
  Tensor graphed = h0.clone();
  std::vector<Tensor> graphed_k = copies(cache0, layers.size()), graphed_v = copies(cache0, layers.size());
  StepGraph graph;
  graph.capture(gpu(), [&] {
    const OverlappedLaunches overlapped;
    run(graphed, graphed_k, graphed_v);
  });
  for (int replay = 0; replay < 3; ++replay) {
    ops::fill_(graphed, 0.0f);
    graph.replay();
    EXPECT_TRUE(bitwise_equal(graphed, serial)) << "replay " << replay;
    for (size_t i = 0; i < layers.size(); ++i) {
      EXPECT_TRUE(bitwise_equal(graphed_k[i], serial_k[i])) << "replay " << replay << " layer " << i;
      EXPECT_TRUE(bitwise_equal(graphed_v[i], serial_v[i])) << "replay " << replay << " layer " << i;
    }
  }
  EXPECT_TRUE(std::isfinite(ops::sum_squares(serial)));
}

}  // namespace
