// Unit tests of the layer contract: forward returns what backward reads as a value, backward consumes it, nothing
// is kept in the layers (two saved forwards backpropagate independently: decoder, vision and audio layers),
// recomputation keeps only the input and the router statistics come with the forward.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/ops.h"
#include "model/audio/audio_encoder_config.h"
#include "model/audio/audio_encoder_layer.h"
#include "model/decoder_layer.h"
#include "model/layer_inputs.h"
#include "model/layers/linear.h"
#include "model/layers/rmsnorm.h"
#include "model/param.h"
#include "model/vision/vision_block.h"
#include "model/vision/vision_config.h"
#include "model/vision/vision_grid.h"
#include "model/vision/vision_rotary.h"
#include "test_model_util.h"

using namespace veomni;
using namespace veomni::test;

namespace {

Tensor random_layer_tensor(const Shape& shape, Rng& rng, float scale, float offset = 0.0f) {
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = offset + scale * static_cast<float>(rng.uniform() - 0.5);
  return t;
}

// Norm weights near one, everything else small: every path carries a gradient.
void randomize(ParamStore& store, uint64_t seed) {
  Rng rng(seed);
  for (const auto& p : store.all()) {
    const bool norm = p->name.find("norm") != std::string::npos;
    p->value = random_layer_tensor(p->local_shape(), rng, norm ? 0.2f : 0.4f, norm ? 1.0f : 0.0f);
  }
}

// One packed row of two sequences (7 + 5 tokens) of the tiny configs.
LayerInputs layer_inputs(const ModelConfig& c) {
  const std::vector<int64_t> positions{0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4};
  const auto s = static_cast<int64_t>(positions.size());
  LayerInputs in;
  in.cu_seqlens = {0, 7, 12};
  in.real_rows = s;
  in.cos = Tensor::empty({s, c.head_dim}, DType::F32);
  in.sin = Tensor::empty({s, c.head_dim}, DType::F32);
  ops::rope_tables(Tensor::from_vector(positions, {s}), c.head_dim, c.rope_theta, {}, in.cos, in.sin);
  return in;
}

std::vector<std::vector<float>> layer_grads(ParamStore& store) {
  std::vector<std::vector<float>> out;
  for (const auto& p : store.all()) out.push_back(p->grad.defined() ? p->grad.to_float_vector() : std::vector<float>());
  return out;
}

ParamStore& in_new_group(ParamStore& store) {
  store.begin_group("layers.0");
  return store;
}

struct LayerFixture {
  ModelConfig config;
  ParamStore store;
  DecoderLayer layer;
  LayerInputs in;
  LayerFixture(const ModelConfig& c, int64_t index, bool recompute)
      : config(c), layer(in_new_group(store), c, index, nullptr, recompute), in(layer_inputs(c)) {
    randomize(store, 5);
  }
  Tensor input(uint64_t seed) {
    Rng rng(seed);
    return random_layer_tensor({12, config.hidden_size}, rng, 2.0f);
  }
};

TEST(LayerSaved, ForwardOnlyKeepsNothing) {
  Rng rng(1);
  ParamStore store;
  store.begin_group("g");
  Linear linear(store.add("w", {3, 4}));
  RmsNorm norm(store.add("norm.weight", {4}), 1e-6);
  randomize(store, 2);
  const Tensor x = random_layer_tensor({5, 4}, rng, 1.0f);
  EXPECT_FALSE(linear.forward(x, false).saved.x.defined());
  EXPECT_FALSE(norm.forward(x, false).saved.x.defined());
  EXPECT_TRUE(linear.forward(x, true).saved.x.defined());
  EXPECT_TRUE(norm.forward(x, true).saved.rstd.defined());

  LayerFixture moe(tiny_moe_config(false), 0, false);
  const DecoderLayer::Output out = moe.layer.forward(moe.input(3), moe.in, false);
  EXPECT_FALSE(out.saved.input.defined());
  EXPECT_FALSE(out.saved.input_norm.x.defined());
  EXPECT_FALSE(out.saved.attention.q.defined());
  EXPECT_FALSE(out.saved.attention.qkv_proj.parts[0].x.defined());
  EXPECT_FALSE(out.saved.moe.x.defined());
  EXPECT_FALSE(out.saved.moe.exchange);
}

TEST(LayerSaved, BackwardConsumesTheSaved) {
  LayerFixture dense(tiny_dense_config(false), 0, false);
  DecoderLayer::Output out = dense.layer.forward(dense.input(3), dense.in, true);
  ASSERT_TRUE(out.saved.mlp.gate.defined());
  ASSERT_TRUE(out.saved.attention.lse.defined());
  dense.layer.backward(std::move(out.saved), Tensor::full<float>(out.out.shape(), 0.5f), dense.in, {});
  EXPECT_FALSE(out.saved.input_norm.x.defined());
  EXPECT_FALSE(out.saved.attention.q.defined());
  EXPECT_FALSE(out.saved.attention.o_proj.x.defined());
  EXPECT_FALSE(out.saved.mlp.gate.defined());
  EXPECT_FALSE(out.saved.mlp.down_proj.x.defined());
}

// Nothing of a forward lives in the layer: backward of a second saved forward first, then of the first, gives the
// gradients of running the two forward-backward pairs in that order, bit for bit.
TEST(LayerSaved, TwoSavedForwardsBackpropagateIndependently) {
  for (const bool recompute : {false, true}) {
    LayerFixture a(tiny_moe_config(false), 0, recompute), b(tiny_moe_config(false), 0, recompute);
    const Tensor x1 = a.input(11), x2 = a.input(12);
    const Tensor dy1 = a.input(13), dy2 = a.input(14);

    DecoderLayer::Output first = a.layer.forward(x1, a.in, true);
    DecoderLayer::Output second = a.layer.forward(x2, a.in, true);
    const Tensor dx2 = a.layer.backward(std::move(second.saved), dy2, a.in, {});
    const Tensor dx1 = a.layer.backward(std::move(first.saved), dy1, a.in, {});

    DecoderLayer::Output second_b = b.layer.forward(x2, b.in, true);
    const Tensor dx2_b = b.layer.backward(std::move(second_b.saved), dy2, b.in, {});
    DecoderLayer::Output first_b = b.layer.forward(x1, b.in, true);
    const Tensor dx1_b = b.layer.backward(std::move(first_b.saved), dy1, b.in, {});

    EXPECT_EQ(first.out.to_float_vector(), first_b.out.to_float_vector()) << "recompute " << recompute;
    EXPECT_EQ(dx1.to_float_vector(), dx1_b.to_float_vector()) << "recompute " << recompute;
    EXPECT_EQ(dx2.to_float_vector(), dx2_b.to_float_vector()) << "recompute " << recompute;
    EXPECT_EQ(layer_grads(a.store), layer_grads(b.store)) << "recompute " << recompute;
  }
}

TEST(LayerSaved, RecomputationKeepsOnlyTheInput) {
  LayerFixture plain(tiny_moe_config(false), 0, false), recomputed(tiny_moe_config(false), 0, true);
  const Tensor x = plain.input(21), dy = plain.input(22);
  DecoderLayer::Output kept = recomputed.layer.forward(x, recomputed.in, true);
  EXPECT_TRUE(kept.saved.input.defined());
  EXPECT_FALSE(kept.saved.input_norm.x.defined());
  EXPECT_FALSE(kept.saved.attention.q.defined());
  EXPECT_FALSE(kept.saved.moe.x.defined());
  DecoderLayer::Output full = plain.layer.forward(x, plain.in, true);
  EXPECT_EQ(kept.out.to_float_vector(), full.out.to_float_vector());
  const Tensor aux = Tensor::from_vector<float>({0.01f, 0.02f, 0.03f, 0.04f}, {4});
  const Tensor dx_recomputed = recomputed.layer.backward(std::move(kept.saved), dy, recomputed.in, aux);
  const Tensor dx_plain = plain.layer.backward(std::move(full.saved), dy, plain.in, aux);
  EXPECT_FALSE(kept.saved.input.defined());
  EXPECT_EQ(dx_recomputed.to_float_vector(), dx_plain.to_float_vector());
  EXPECT_EQ(layer_grads(recomputed.store), layer_grads(plain.store));
}

TEST(LayerSaved, RouterStatisticsComeWithTheForward) {
  LayerFixture moe(tiny_moe_config(false), 0, false);
  moe.in.real_rows = 9;  // the last three rows are padding: not counted
  for (const bool save : {false, true}) {
    const DecoderLayer::Output out = moe.layer.forward(moe.input(31), moe.in, save);
    ASSERT_TRUE(out.router_stats.has_value());
    EXPECT_EQ(out.router_stats->rows, 9);
    ASSERT_EQ(out.router_stats->stats.shape(), (Shape{2, moe.config.num_experts}));
    const std::vector<float> stats = out.router_stats->stats.to_float_vector();
    double slots = 0, probs = 0;
    for (int64_t e = 0; e < moe.config.num_experts; ++e) {
      slots += stats[static_cast<size_t>(e)];
      probs += stats[static_cast<size_t>(moe.config.num_experts + e)];
    }
    EXPECT_EQ(slots, 9.0 * static_cast<double>(moe.config.num_experts_per_tok));
    EXPECT_NEAR(probs, 9.0, 1e-5);  // each row's softmax sums to one
  }
  LayerFixture dense(tiny_moe_config(false), 1, false);  // layer 1 is in mlp_only_layers
  EXPECT_FALSE(dense.layer.forward(dense.input(31), dense.in, true).router_stats.has_value());
}

// Forward x1 and x2 (saving both), backward of x2 then of x1, against forward-backward of x2 and then of x1 on a
// twin: outputs, input gradients and parameter gradients bit for bit; backward leaves the Saved empty.
// forward(layer, x) saves; backward(layer, Saved&&, dy); holds(saved) tells whether a Saved still holds tensors.
template <class Layer, class Forward, class Backward, class Holds>
void expect_saved_forwards_independent(Layer& layer, ParamStore& store, Layer& twin, ParamStore& twin_store,
                                       const std::function<Tensor(uint64_t)>& input, Forward forward,
                                       Backward backward, Holds holds) {
  const Tensor x1 = input(41), x2 = input(42), dy1 = input(43), dy2 = input(44);
  typename Layer::Output first = forward(layer, x1);
  typename Layer::Output second = forward(layer, x2);
  EXPECT_TRUE(holds(first.saved));
  const Tensor dx2 = backward(layer, std::move(second.saved), dy2);
  const Tensor dx1 = backward(layer, std::move(first.saved), dy1);
  EXPECT_FALSE(holds(first.saved));
  EXPECT_FALSE(holds(second.saved));

  typename Layer::Output second_twin = forward(twin, x2);
  const Tensor dx2_twin = backward(twin, std::move(second_twin.saved), dy2);
  typename Layer::Output first_twin = forward(twin, x1);
  const Tensor dx1_twin = backward(twin, std::move(first_twin.saved), dy1);
  EXPECT_EQ(first.out.to_float_vector(), first_twin.out.to_float_vector());
  EXPECT_EQ(dx1.to_float_vector(), dx1_twin.to_float_vector());
  EXPECT_EQ(dx2.to_float_vector(), dx2_twin.to_float_vector());
  EXPECT_EQ(layer_grads(store), layer_grads(twin_store));
}

VisionConfig tiny_vision_config() {
  const nlohmann::json j = {{"depth", 1},       {"hidden_size", 16},       {"intermediate_size", 24},
                            {"num_heads", 2},   {"patch_size", 4},         {"temporal_patch_size", 2},
                            {"in_channels", 3}, {"spatial_merge_size", 2}, {"out_hidden_size", 12},
                            {"num_position_embeddings", 16}, {"hidden_act", "gelu_pytorch_tanh"}};
  return vision_config_from_json(j, "qwen3_vl", "test");
}

TEST(LayerSaved, VisionBlockSavedForwardsAreIndependent) {
  const VisionConfig c = tiny_vision_config();
  const std::vector<VisionGrid> grids{{2, 4, 4}};  // two frames of 4x4 patches
  VisionLayerInputs in;
  vision_rope_tables(patch_coords(grids, c.spatial_merge_size), c.head_dim(), c.rope_theta, Device::cpu(), in.cos,
                     in.sin);
  in.cu_seqlens = frame_cu_seqlens(grids);
  ParamStore store, twin_store;
  VisionBlock block(in_new_group(store), c, 0), twin(in_new_group(twin_store), c, 0);
  randomize(store, 6);
  randomize(twin_store, 6);
  auto input = [&](uint64_t seed) {
    Rng rng(seed);
    return random_layer_tensor({total_patches(grids), c.hidden_size}, rng, 2.0f);
  };
  EXPECT_FALSE(block.forward(input(40), in, false).saved.norm1.x.defined());
  expect_saved_forwards_independent(
      block, store, twin, twin_store, input,
      [&](VisionBlock& b, const Tensor& x) { return b.forward(x, in, true); },
      [&](VisionBlock& b, VisionBlock::Saved&& saved, const Tensor& dy) {
        return b.backward(std::move(saved), dy, in);
      },
      [](const VisionBlock::Saved& saved) { return saved.norm1.x.defined() || saved.attention.q.defined(); });
}

TEST(LayerSaved, AudioEncoderLayerSavedForwardsAreIndependent) {
  AudioEncoderConfig c;
  c.d_model = 16;
  c.encoder_layers = 1;
  c.encoder_attention_heads = 2;
  c.encoder_ffn_dim = 24;
  const std::vector<int32_t> windows{0, 6, 10};
  ParamStore store, twin_store;
  AudioEncoderLayer layer(in_new_group(store), c, 0), twin(in_new_group(twin_store), c, 0);
  randomize(store, 7);
  randomize(twin_store, 7);
  auto input = [&](uint64_t seed) {
    Rng rng(seed);
    return random_layer_tensor({10, c.d_model}, rng, 2.0f);
  };
  EXPECT_FALSE(layer.forward(input(40), windows, false).saved.fc1_out.defined());
  expect_saved_forwards_independent(
      layer, store, twin, twin_store, input,
      [&](AudioEncoderLayer& l, const Tensor& x) { return l.forward(x, windows, true); },
      [&](AudioEncoderLayer& l, AudioEncoderLayer::Saved&& saved, const Tensor& dy) {
        return l.backward(std::move(saved), dy, windows);
      },
      [](const AudioEncoderLayer::Saved& saved) { return saved.attn_norm.x.defined() || saved.q.defined(); });
}

}  // namespace
