// Vision tower: config parsing, HF names and groups, shapes, finite-difference gradients of every parameter,
// per-frame attention bounding, position interpolation against a direct 4-tap form, bad inputs, HF fixtures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/rng.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "kernels/ops.h"
#include "model/vision/vision_config.h"
#include "model/vision/vision_pos_embed.h"
#include "model/vision/vision_rotary.h"
#include "model/vision/vision_tower.h"
#include "tests/common/expect_error.h"
#include "tests/common/hf_fixture.h"

using namespace veomni;

namespace {

// Small enough for finite differences on every parameter: patch 4 (patch_dim 96), hidden 16, 2 heads of 8, a 4x4
// position table resampled to 4x6 grids, three blocks with deepstack after blocks 0 and 2.
VisionConfig small_config(VisionFlavor flavor = VisionFlavor::Qwen3VL) {
  nlohmann::json j = {{"depth", 3},           {"hidden_size", 16},          {"intermediate_size", 24},
                      {"num_heads", 2},        {"patch_size", 4},            {"temporal_patch_size", 2},
                      {"in_channels", 3},      {"spatial_merge_size", 2},    {"out_hidden_size", 12},
                      {"num_position_embeddings", 16}, {"deepstack_visual_indexes", {2, 0}},
                      {"hidden_act", "gelu_pytorch_tanh"}, {"initializer_range", 0.2}};
  return vision_config_from_json(j, flavor == VisionFlavor::Qwen3Omni ? "qwen3_omni_moe" : "qwen3_vl", "test");
}

Tensor random_vision_tensor(const Shape& shape, uint64_t seed, double scale) {
  Rng rng(seed);
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(scale * (2.0 * rng.uniform() - 1.0));
  return t;
}

struct Model {
  ParamStore store;
  std::unique_ptr<VisionTower> tower;
};

// HF init, then LayerNorm weights and all biases moved off 1 and 0 so that their gradients are exercised.
std::unique_ptr<Model> make_vision_model(const VisionConfig& config, uint64_t seed = 7) {
  auto m = std::make_unique<Model>();
  m->tower = std::make_unique<VisionTower>(m->store, config, VisionOptions{});
  m->store.materialize_all(Device::cpu(), DType::F32);
  m->tower->init_weights(seed);
  uint64_t s = seed;
  for (const auto& p : m->store.all()) {
    const bool bias = p->name.size() > 5 && p->name.compare(p->name.size() - 5, 5, ".bias") == 0;
    const bool norm = p->name.find("norm") != std::string::npos || p->name.find("ln_q") != std::string::npos;
    if (bias || norm) ops::add_(p->value, random_vision_tensor(p->shape, ++s, 0.2));
  }
  return m;
}

struct Input {
  Tensor pixels;
  std::vector<VisionGrid> grids;
};

Input make_input(const VisionConfig& c, std::vector<VisionGrid> grids, uint64_t seed = 3) {
  return {random_vision_tensor({total_patches(grids), c.patch_dim()}, seed, 1.0), std::move(grids)};
}

// L = sum(merged * Wm) + sum_k sum(deepstack_k * W_k) with fixed random weights (the fixture script's loss).
struct LossWeights {
  Tensor merged;
  std::vector<Tensor> deepstack;
};

LossWeights loss_weights(const VisionTower::Output& out) {
  LossWeights w{random_vision_tensor(out.merged.shape(), 101, 1.0), {}};
  for (size_t k = 0; k < out.deepstack.size(); ++k)
    w.deepstack.push_back(random_vision_tensor(out.deepstack[k].shape(), 200 + k, 1.0));
  return w;
}

double dot(const Tensor& a, const Tensor& b) {
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += static_cast<double>(pa[i]) * pb[i];
  return s;
}

double vision_loss_of(const VisionTower::Output& out, const LossWeights& w) {
  double l = dot(out.merged, w.merged);
  for (size_t k = 0; k < out.deepstack.size(); ++k) l += dot(out.deepstack[k], w.deepstack[k]);
  return l;
}

// Every parameter's gradient (empty where none was formed), by name.
std::map<std::string, std::vector<float>> grads_of(const ParamStore& store) {
  std::map<std::string, std::vector<float>> grads;
  for (const auto& p : store.all()) grads[p->name] = p->grad.defined() ? p->grad.to_float_vector() : std::vector<float>{};
  return grads;
}

std::vector<std::string> sorted_names(const ParamStore& store) {
  std::vector<std::string> names;
  for (const auto& p : store.all()) names.push_back(p->name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST(VisionConfigTest, ReadsTheToyConfigs) {
  const std::string dir = std::string(VEOMNI_SOURCE_DIR) + "/configs/model_configs/";
  const VisionConfig vl = load_vision_config(dir + "qwen3_vl_toy");
  EXPECT_EQ(vl.flavor, VisionFlavor::Qwen3VL);
  EXPECT_EQ(vl.param_prefix, "model.visual.");
  EXPECT_EQ(vl.depth, 3);
  EXPECT_EQ(vl.hidden_size, 32);
  EXPECT_EQ(vl.head_dim(), 16);
  EXPECT_EQ(vl.patch_dim(), 1536);
  EXPECT_EQ(vl.grid_side(), 8);
  EXPECT_EQ(vl.out_hidden_size, 64);
  EXPECT_EQ(vl.deepstack_visual_indexes, (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(vl.tanh_gelu());
  EXPECT_EQ(load_vision_config(dir + "qwen3_vl_moe_toy").model_type, "qwen3_vl_moe");
}

TEST(VisionConfigTest, OmniThinkerVisionConfig) {
  nlohmann::json omni = {{"model_type", "qwen3_omni_moe"},
                         {"thinker_config", {{"vision_config", {{"depth", 2}, {"hidden_size", 64}, {"num_heads", 4},
                                                                {"num_position_embeddings", 36},
                                                                {"rope_parameters", {{"rope_theta", 500.0}}}}}}}};
  const std::string path = ::testing::TempDir() + "/vision_omni_config.json";
  write_json_file(path, omni);
  const VisionConfig c = load_vision_config(path);
  EXPECT_EQ(c.flavor, VisionFlavor::Qwen3Omni);
  EXPECT_EQ(c.param_prefix, "thinker.visual.");
  EXPECT_EQ(c.rope_theta, 500.0);
  EXPECT_EQ(c.intermediate_size, 4304);  // transformers' default
  EXPECT_EQ(c.deepstack_visual_indexes, (std::vector<int64_t>{8, 16, 24}));
}

TEST(VisionConfigTest, BadConfigsAreInputErrors) {
  auto parse = [](nlohmann::json j) { return vision_config_from_json(j, "qwen3_vl", "cfg.json"); };
  EXPECT_THROW(parse({{"hidden_size", 30}, {"num_heads", 4}}), InputError);         // not a multiple
  EXPECT_THROW(parse({{"num_position_embeddings", 50}}), InputError);                // not square
  EXPECT_THROW(parse({{"hidden_act", "relu"}}), InputError);
  EXPECT_THROW(parse({{"depth", "three"}}), InputError);
  EXPECT_THROW(parse({{"patch_size", {16, 14}}}), InputError);
  EXPECT_THROW(vision_config_from_json({}, "qwen3", "cfg.json"), InputError);          // no vision tower
  try {
    parse({{"depth", -1}});
    FAIL() << "negative depth accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'depth'"), std::string::npos) << e.what();
  }
}

TEST(VisionTowerTest, HfNamesShapesAndGroups) {
  const VisionConfig c = load_vision_config(std::string(VEOMNI_SOURCE_DIR) + "/configs/model_configs/qwen3_vl_toy");
  ParamStore store;
  VisionTower tower(store, c, VisionOptions{});
  EXPECT_EQ(store.at("model.visual.patch_embed.proj.weight").shape, (Shape{32, 3, 2, 16, 16}));
  EXPECT_EQ(store.at("model.visual.pos_embed.weight").shape, (Shape{64, 32}));
  EXPECT_EQ(store.at("model.visual.blocks.2.attn.qkv.weight").shape, (Shape{96, 32}));
  EXPECT_EQ(store.at("model.visual.blocks.0.mlp.linear_fc1.weight").shape, (Shape{64, 32}));
  EXPECT_EQ(store.at("model.visual.merger.norm.weight").shape, (Shape{32}));
  EXPECT_EQ(store.at("model.visual.merger.linear_fc2.weight").shape, (Shape{64, 128}));
  EXPECT_EQ(store.at("model.visual.deepstack_merger_list.1.norm.weight").shape, (Shape{128}));
  // 3 embed + 12 per block + 6 per merger.
  EXPECT_EQ(store.all().size(), 3u + 3 * 12 + 3 * 6);
  std::vector<std::string> groups;
  for (const ParamGroup& g : store.groups()) groups.push_back(g.name);
  EXPECT_EQ(groups, (std::vector<std::string>{"visual.embed", "visual.blocks.0", "visual.blocks.1", "visual.blocks.2",
                                              "visual.deepstack.0", "visual.deepstack.1", "visual.merger"}));
  EXPECT_EQ(tower.group_indices().size(), groups.size());
}

TEST(VisionTowerTest, OmniNames) {
  ParamStore store;
  VisionTower tower(store, small_config(VisionFlavor::Qwen3Omni), VisionOptions{});
  for (const char* name : {"thinker.visual.patch_embed.proj.weight", "thinker.visual.merger.ln_q.bias",
                           "thinker.visual.merger.mlp.0.weight", "thinker.visual.merger.mlp.2.bias",
                           "thinker.visual.merger_list.1.ln_q.weight", "thinker.visual.blocks.0.attn.proj.bias"})
    EXPECT_NE(store.find(name), nullptr) << name;
  EXPECT_EQ(store.find("thinker.visual.merger.norm.weight"), nullptr);
}

TEST(VisionTowerTest, OutputShapesAndDeepstackOrder) {
  const VisionConfig c = small_config();
  auto m = make_vision_model(c);
  const Input in = make_input(c, {{1, 4, 4}, {2, 4, 6}});
  const VisionTower::Output out = m->tower->forward(in.pixels, in.grids, false);
  EXPECT_EQ(out.merged.shape(), (Shape{16, 12}));
  ASSERT_EQ(out.deepstack.size(), 2u);
  EXPECT_EQ(m->tower->num_deepstack_features(), 2);
  // Block order: block 0's feature (merger 1) comes first, as transformers appends them.
  VisionConfig swapped = c;
  swapped.deepstack_visual_indexes = {0, 2};
  auto m2 = std::make_unique<Model>();
  m2->tower = std::make_unique<VisionTower>(m2->store, swapped, VisionOptions{});
  m2->store.materialize_all(Device::cpu(), DType::F32);
  for (const auto& p : m->store.all()) {
    std::string name = p->name;
    for (auto [from, to] : {std::pair<std::string, std::string>{"list.0.", "list.X."}, {"list.1.", "list.0."},
                            {"list.X.", "list.1."}}) {
      const size_t at = name.find(from);
      if (at != std::string::npos) name.replace(at, from.size(), to);
    }
    m2->store.at(name).value.copy_from(p->value);
  }
  const VisionTower::Output out2 = m2->tower->forward(in.pixels, in.grids, false);
  EXPECT_LE(veomni::testing::relative_error(out2.deepstack[0], out.deepstack[0]), 0.0);
  EXPECT_LE(veomni::testing::relative_error(out2.merged, out.merged), 0.0);
}

TEST(VisionTowerTest, OutOfRangeDeepstackIndexesProduceNoFeature) {
  VisionConfig c = small_config();
  c.deepstack_visual_indexes = {1, 5, 11};  // like VeOmni's qwen3vl toy: only block 1 exists
  auto m = make_vision_model(c);
  EXPECT_EQ(m->tower->num_deepstack_features(), 1);
  const Input in = make_input(c, {{1, 2, 2}});
  VisionTower::Output out = m->tower->forward(in.pixels, in.grids);
  EXPECT_EQ(out.deepstack.size(), 1u);
  m->tower->backward(std::move(out.saved), out.merged, {Tensor()});  // an unused feature: undefined gradient
  for (const char* name : {"model.visual.deepstack_merger_list.0.linear_fc1.weight",
                           "model.visual.deepstack_merger_list.2.norm.bias"}) {
    ASSERT_TRUE(m->store.at(name).grad.defined()) << name;
    EXPECT_EQ(ops::sum_squares(m->store.at(name).grad), 0.0) << name;
  }
  EXPECT_GT(ops::sum_squares(m->store.at("model.visual.blocks.1.mlp.linear_fc2.bias").grad), 0.0);
}

TEST(VisionTowerTest, BackwardWithoutSavedForwardIsAnInternalError) {
  const VisionConfig c = small_config();
  auto m = make_vision_model(c);
  const Input in = make_input(c, {{1, 2, 2}});
  const std::vector<Tensor> no_deepstack(2);
  const std::vector<std::string> message{"vision backward without the saved values"};
  VisionTower::Output unsaved = m->tower->forward(in.pixels, in.grids, false);
  EXPECT_FALSE(unsaved.saved.kept);
  EXPECT_TRUE(unsaved.saved.blocks.empty());
  veomni::testing::expect_internal_error(
      [&] { m->tower->backward(std::move(unsaved.saved), unsaved.merged, no_deepstack); }, message);
  veomni::testing::expect_internal_error([&] { m->tower->backward({}, unsaved.merged, no_deepstack); }, message);
  VisionTower::Output no_grids = m->tower->forward(Tensor(), {}, false);
  veomni::testing::expect_internal_error(
      [&] { m->tower->backward(std::move(no_grids.saved), no_grids.merged, no_deepstack); }, message);
  // backward consumes its Saved: nothing of the forward is left, and a second backward of it is refused.
  VisionTower::Output out = m->tower->forward(in.pixels, in.grids);
  m->tower->backward(std::move(out.saved), out.merged, out.deepstack);
  EXPECT_FALSE(out.saved.kept);
  EXPECT_TRUE(out.saved.blocks.empty() && out.saved.deepstack.empty() && out.saved.pos_embed.plans.empty());
  EXPECT_FALSE(out.saved.patches.defined() || out.saved.inputs.cos.defined());
  veomni::testing::expect_internal_error([&] { m->tower->backward(std::move(out.saved), out.merged, out.deepstack); },
                                         message);
}

// Two forwards, then their backwards in reverse order: each backward gives exactly the gradients of its own
// forward/backward pair, so the tower keeps no state of a forward outside the Saved value it returned. (Compared
// one backward at a time, from zero gradients: summed, the two orders differ in rounding only.)
TEST(VisionTowerTest, InterleavedForwardsAndReversedBackwardsMatchSeparatePairs) {
  const VisionConfig c = small_config();
  auto m = make_vision_model(c);
  const Input a = make_input(c, {{1, 4, 4}, {2, 4, 6}}, 3), b = make_input(c, {{1, 2, 4}}, 4);
  auto pair = [&](const Input& in) {
    m->store.zero_grads();
    VisionTower::Output out = m->tower->forward(in.pixels, in.grids);
    const LossWeights w = loss_weights(out);
    m->tower->backward(std::move(out.saved), w.merged, w.deepstack);
    return grads_of(m->store);
  };
  const auto grads_a = pair(a), grads_b = pair(b);
  ASSERT_NE(grads_a, grads_b);

  VisionTower::Output out_a = m->tower->forward(a.pixels, a.grids);
  VisionTower::Output out_b = m->tower->forward(b.pixels, b.grids);
  const LossWeights wa = loss_weights(out_a), wb = loss_weights(out_b);
  m->store.zero_grads();
  m->tower->backward(std::move(out_b.saved), wb.merged, wb.deepstack);
  EXPECT_EQ(grads_of(m->store), grads_b);
  m->store.zero_grads();
  m->tower->backward(std::move(out_a.saved), wa.merged, wa.deepstack);
  EXPECT_EQ(grads_of(m->store), grads_a);
}

// Central differences in f32 (step 1e-2 on weights of scale ~0.2) against the analytic gradient, for a sample of
// elements of every parameter (first, last, largest gradient, two random). Tolerance: 3% of the gradient plus 1%
// of the parameter's largest gradient plus 1e-4; a wrong layout or a missing term is off by far more.
TEST(VisionTowerTest, FiniteDifferenceEveryParameter) {
  for (VisionFlavor flavor : {VisionFlavor::Qwen3VL, VisionFlavor::Qwen3Omni}) {
    const VisionConfig c = small_config(flavor);
    auto m = make_vision_model(c);
    const Input in = make_input(c, {{1, 4, 4}, {2, 4, 6}});
    VisionTower::Output out = m->tower->forward(in.pixels, in.grids);
    const LossWeights w = loss_weights(out);
    m->store.zero_grads();
    m->tower->backward(std::move(out.saved), w.merged, w.deepstack);
    Rng rng(5);
    int checked = 0;
    for (const auto& p : m->store.all()) {
      ASSERT_TRUE(p->grad.defined()) << p->name;
      const float* g = p->grad.data<float>();
      const int64_t n = p->grad.numel();
      int64_t largest = 0;
      float gmax = 0;
      for (int64_t i = 0; i < n; ++i)
        if (std::fabs(g[i]) > gmax) gmax = std::fabs(g[i]), largest = i;
      EXPECT_GT(gmax, 0.0f) << p->name << " has an all-zero gradient";
      for (int64_t i : {int64_t{0}, n - 1, largest, static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(n))),
                        static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(n)))}) {
        float* v = p->value.data<float>();
        const float saved = v[i], step = 1e-2f;
        v[i] = saved + step;
        const double up = vision_loss_of(m->tower->forward(in.pixels, in.grids, false), w);
        v[i] = saved - step;
        const double down = vision_loss_of(m->tower->forward(in.pixels, in.grids, false), w);
        v[i] = saved;
        const double fd = (up - down) / (2.0 * step);
        EXPECT_NEAR(fd, g[i], 0.03 * std::fabs(g[i]) + 0.01 * gmax + 1e-4) << p->name << "[" << i << "]";
        ++checked;
      }
    }
    EXPECT_EQ(checked, 5 * static_cast<int>(m->store.all().size()));
  }
}

TEST(VisionTowerTest, AttentionIsBoundedPerFrameAndImage) {
  const VisionConfig c = small_config();
  auto m = make_vision_model(c);
  Input in = make_input(c, {{2, 4, 4}, {1, 2, 4}});  // frames of 16 patches, then an image of 8
  const VisionTower::Output base = m->tower->forward(in.pixels, in.grids, false);
  Tensor changed = in.pixels.clone();
  float* p = changed.data<float>();
  for (int64_t i = 16 * c.patch_dim(); i < 32 * c.patch_dim(); ++i) p[i] += 0.5f;  // frame 2 only
  const VisionTower::Output after = m->tower->forward(changed, in.grids, false);
  // Merged rows: frame 1 -> [0, 4), frame 2 -> [4, 8), the image -> [8, 10).
  for (const auto& [a, b] : {std::pair<const Tensor*, const Tensor*>{&base.merged, &after.merged},
                             {&base.deepstack[0], &after.deepstack[0]}, {&base.deepstack[1], &after.deepstack[1]}}) {
    EXPECT_EQ(veomni::testing::relative_error(a->slice(0, 4), b->slice(0, 4)), 0.0);
    EXPECT_EQ(veomni::testing::relative_error(a->slice(8, 10), b->slice(8, 10)), 0.0);
    EXPECT_GT(veomni::testing::relative_error(a->slice(4, 8), b->slice(4, 8)), 1e-3);
  }
  EXPECT_EQ(frame_cu_seqlens(in.grids), (std::vector<int32_t>{0, 16, 32, 40}));
}

TEST(VisionTowerTest, BadGridsAreInputErrors) {
  const VisionConfig c = small_config();
  auto m = make_vision_model(c);
  const Input in = make_input(c, {{1, 4, 4}});
  auto run = [&](const Tensor& pixels, std::vector<VisionGrid> grids) { m->tower->forward(pixels, grids, false); };
  EXPECT_THROW(run(in.pixels, {{1, 4, 3}}), InputError);        // w not a multiple of the merge size
  EXPECT_THROW(run(in.pixels, {{1, 2, 4}}), InputError);        // 8 patches described, 16 given
  EXPECT_THROW(run(in.pixels, {{0, 4, 4}}), InputError);        // empty grid
  EXPECT_THROW(run(in.pixels, {}), InputError);                 // no grid
  EXPECT_THROW(run(in.pixels.view({8, 2 * c.patch_dim()}), {{1, 4, 2}}), InputError);  // wrong patch width
  EXPECT_THROW(grids_from_tensor(Tensor::from_vector<int64_t>({1, 4}, {1, 2})), InputError);
  try {
    run(in.pixels, {{1, 2, 4}});
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("16 patches"), std::string::npos) << e.what();
  }
}

// The separable GEMM form against transformers' direct form: four taps per patch with weights (1-dh)(1-dw), ...,
// summed, then ordered by merge window and repeated per frame.
TEST(VisionPosEmbedTest, MatchesTheFourTapFormInPatchOrder) {
  const int64_t side = 4, d = 3, m = 2;
  ParamStore store;
  store.begin_group("visual.embed");
  Parameter* table = store.add("pos_embed.weight", {side * side, d});
  table->value = random_vision_tensor({side * side, d}, 9, 1.0);
  VisionPosEmbed pos(table, side, m);
  const std::vector<VisionGrid> grids{{2, 4, 6}, {1, 2, 2}};
  const Tensor out = pos.forward(grids, false).out;
  const std::vector<PatchCoord> coords = patch_coords(grids, m);
  ASSERT_EQ(out.dim(0), static_cast<int64_t>(coords.size()));
  const float* e = table->value.data<float>();
  int64_t row = 0;
  double worst = 0;
  for (const VisionGrid& g : grids)
    for (int64_t n = 0; n < g.patches(); ++n, ++row) {
      auto axis = [&](int64_t i, int64_t size, int64_t& lo, int64_t& hi, float& frac) {
        const float src = static_cast<float>(i) * (side - 1) / static_cast<float>(std::max<int64_t>(size - 1, 1));
        lo = static_cast<int64_t>(src);
        hi = std::min(lo + 1, side - 1);
        frac = src - static_cast<float>(lo);
      };
      int64_t y0, y1, x0, x1;
      float dh, dw;
      axis(coords[static_cast<size_t>(row)].row, g.h, y0, y1, dh);
      axis(coords[static_cast<size_t>(row)].col, g.w, x0, x1, dw);
      for (int64_t k = 0; k < d; ++k) {
        const double expect = (1 - dh) * (1 - dw) * e[(y0 * side + x0) * d + k] + (1 - dh) * dw * e[(y0 * side + x1) * d + k] +
                              dh * (1 - dw) * e[(y1 * side + x0) * d + k] + dh * dw * e[(y1 * side + x1) * d + k];
        worst = std::max(worst, std::fabs(expect - out.data<float>()[row * d + k]));
      }
    }
  EXPECT_LT(worst, 1e-6);
  // Corners map to the table's corners exactly.
  EXPECT_FLOAT_EQ(out.data<float>()[0], e[0]);
}

TEST(VisionRotaryTest, RowAndColumnAngles) {
  const int64_t head_dim = 8;  // two frequencies per axis: 1 and 10000^(-1/2)
  Tensor cos, sin;
  vision_rope_tables({{0, 0}, {3, 5}}, head_dim, 10000.0, Device::cpu(), cos, sin);
  const float* c = cos.data<float>() + head_dim;  // the patch at row 3, column 5
  const float* s = sin.data<float>() + head_dim;
  const float f1 = 1.0f / std::pow(10000.0f, 0.5f);
  EXPECT_FLOAT_EQ(c[0], std::cos(3.0f));
  EXPECT_FLOAT_EQ(c[1], std::cos(3.0f * f1));
  EXPECT_FLOAT_EQ(c[2], std::cos(5.0f));
  EXPECT_FLOAT_EQ(s[3], std::sin(5.0f * f1));
  for (int64_t i = 0; i < head_dim / 2; ++i) EXPECT_EQ(c[i], c[i + head_dim / 2]);
  EXPECT_FLOAT_EQ(cos.data<float>()[0], 1.0f);
}

// tests/fixtures/vision/<name>, written by scripts/gen_vision_fixtures.py with transformers 5.17 (CPU, fp32).
// Disabled until that script has run on the GPU machine and its output is committed (issue "omni-modal training");
// run it meanwhile with --gtest_also_run_disabled_tests.
class VisionHfFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VisionHfFixtureTest, ForwardAndEveryGradientMatchTransformers) {
  const std::string dir = std::string(VEOMNI_FIXTURES_DIR) + "/vision/" + GetParam();
  for (const char* file : {"config.json", "weights.safetensors", "io.safetensors", "grads.safetensors"})
    ASSERT_TRUE(std::filesystem::exists(dir + "/" + file))
        << "missing fixture " << dir << "/" << file << ": run scripts/gen_vision_fixtures.py where transformers 5.17 is";
  const VisionConfig c = load_vision_config(dir + "/config.json");
  SafetensorsReader weights(dir + "/weights.safetensors"), io(dir + "/io.safetensors"), grads(dir + "/grads.safetensors");

  ParamStore store;
  VisionTower tower(store, c, VisionOptions{});
  std::vector<std::string> fixture_names;
  for (const auto& e : weights.entries()) fixture_names.push_back(e.name);
  std::sort(fixture_names.begin(), fixture_names.end());
  ASSERT_EQ(sorted_names(store), fixture_names) << "our HF names differ from what transformers saved";

  store.materialize_all(Device::cpu(), DType::F32);
  for (const auto& p : store.all()) {
    ASSERT_EQ(weights.entry(p->name).shape, p->shape) << p->name;
    weights.read_into(p->name, p->value);
  }
  const std::vector<VisionGrid> grids = grids_from_tensor(io.read("grid_thw"));
  VisionTower::Output out = tower.forward(io.read("pixel_values"), grids);
  EXPECT_LE(veomni::testing::relative_error(out.merged, io.read("merged")), 1e-4);
  std::vector<Tensor> d_deepstack;
  ASSERT_EQ(static_cast<int64_t>(out.deepstack.size()), tower.num_deepstack_features());
  for (size_t k = 0; k < out.deepstack.size(); ++k) {
    EXPECT_LE(veomni::testing::relative_error(out.deepstack[k], io.read("deepstack." + std::to_string(k))), 1e-4) << k;
    d_deepstack.push_back(io.read("loss_weight.deepstack." + std::to_string(k)));
  }
  store.zero_grads();
  tower.backward(std::move(out.saved), io.read("loss_weight.merged"), d_deepstack);
  double worst = 0;
  for (const auto& p : store.all()) {
    const double err = veomni::testing::relative_error(p->grad, grads.read("grad." + p->name));
    EXPECT_LE(err, 1e-4) << "gradient of " << p->name;
    worst = std::max(worst, err);
  }
  std::printf("[vision %s] worst gradient rel err %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Toys, VisionHfFixtureTest, ::testing::Values("qwen3_vl_toy", "qwen3_omni_vision_toy"));
