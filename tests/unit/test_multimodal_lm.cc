// Unit tests of the multimodal LM (Qwen3-VL, Qwen3-VL-MoE, Qwen3-Omni thinker): names, finite-difference gradients
// through the LM into the encoders, the text-only path, passes as values, freezing, bad inputs, and the transformers
// fixture.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "model/audio/audio_layout.h"
#include "io/json_file.h"
#include "model/thinker/media_rows.h"
#include "model/thinker/multimodal_lm.h"
#include "model/thinker/thinker_config.h"
#include "model/vision/vision_grid.h"
#include "tests/common/expect_error.h"
#include "tests/common/hf_fixture.h"

namespace veomni {
namespace {

ThinkerConfig multimodal_toy_config(const std::string& name) {
  return load_thinker_config(std::string(VEOMNI_SOURCE_DIR) + "/configs/model_configs/" + name);
}

// The toy configs with a small vocabulary (the real 151936-row tables make every finite difference slow) and
// text weights large enough that every path carries a measurable gradient.
ThinkerConfig small_vocab_config(const std::string& name) {
  ThinkerConfig c = multimodal_toy_config(name);
  c.text.vocab_size = 300;
  c.text.initializer_range = 0.1;
  return c;
}

double gaussian(Rng& rng) {
  const double radius = std::sqrt(-2.0 * std::log(1.0 - rng.uniform()));
  return radius * std::cos(2.0 * M_PI * rng.uniform());
}

Tensor bool_mask(const std::vector<int64_t>& positions, int64_t length) {
  Tensor mask = Tensor::zeros({length}, DType::Bool);
  auto* flags = static_cast<uint8_t*>(mask.raw_data());
  for (int64_t p : positions) flags[p] = 1;
  return mask;
}

Tensor random_mm_tensor(const Shape& shape, uint64_t seed, double scale) {
  Rng rng(seed);
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(scale * gaussian(rng));
  return t;
}

// Builds one packed row sample by sample: text runs, image / video blocks and audio blocks, with M-RoPE positions
// laid out as get_rope_index does (text arange on all streams, a visual block at (t, row, col) offsets, audio arange).
class PackedRowBuilder {
 public:
  PackedRowBuilder(int64_t vocab, uint64_t seed) : vocab_(vocab), rng_(seed) {}

  void begin_sample() {
    cu_.push_back(static_cast<int32_t>(ids_.size()));
    next_ = 0;
  }
  void text(int64_t n) {
    // Ids from 1: id 0 stands for the zeroed media rows, whose embedding row must get no gradient.
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = 1 + static_cast<int64_t>(rng_.uniform_int(static_cast<uint64_t>(vocab_ - 1)));
      push(id, next_ + i, next_ + i, next_ + i, Text);
    }
    next_ += n;
  }
  void visual(const VisionGrid& g, bool video) {
    const int64_t h = g.h / 2, w = g.w / 2;
    for (int64_t t = 0; t < g.t; ++t)
      for (int64_t r = 0; r < h; ++r)
        for (int64_t c = 0; c < w; ++c) push(0, next_ + t, next_ + r, next_ + c, video ? Video : Image);
    next_ += std::max({g.t, h, w});
    (video ? video_grids : image_grids).push_back(g);
  }
  void audio(int64_t frames, const AudioEncoderConfig& config) {
    const int64_t n = audio_layout({frames}, config).num_tokens();
    for (int64_t i = 0; i < n; ++i) push(0, next_ + i, next_ + i, next_ + i, Audio);
    next_ += n;
    audio_lengths.push_back(frames);
  }

  MultimodalBatch finish(bool float_positions, int64_t patch_dim, int64_t mel_bins) {
    const auto s = static_cast<int64_t>(ids_.size());
    cu_.push_back(static_cast<int32_t>(s));
    MultimodalBatch b;
    b.text.input_ids = Tensor::from_vector(ids_, {s});
    std::vector<int64_t> targets(ids_.size(), kIgnoreIndex);
    for (size_t k = 0; k + 1 < cu_.size(); ++k)
      for (int64_t i = cu_[k]; i + 1 < cu_[k + 1]; ++i) targets[static_cast<size_t>(i)] = target_for(i);
    b.text.target_ids = Tensor::from_vector(targets, {s});
    std::vector<int64_t> positions;
    for (const auto& stream : pos_) positions.insert(positions.end(), stream.begin(), stream.end());
    if (float_positions) {
      b.text.position_ids = Tensor::from_vector(std::vector<float>(positions.begin(), positions.end()), {3, s});
    } else {
      b.text.position_ids = Tensor::from_vector(positions, {3, s});
    }
    b.text.cu_seqlens = cu_;
    for (int64_t t : targets) b.text.valid_tokens += t != kIgnoreIndex;
    b.image_mask = bool_mask(rows_of(Image), s);
    b.video_mask = bool_mask(rows_of(Video), s);
    b.audio_mask = bool_mask(rows_of(Audio), s);
    if (!image_grids.empty()) b.pixel_values = random_mm_tensor({total_patches(image_grids), patch_dim}, 21, 1.0);
    if (!video_grids.empty())
      b.pixel_values_videos = random_mm_tensor({total_patches(video_grids), patch_dim}, 22, 1.0);
    int64_t frames = 0;
    for (int64_t f : audio_lengths) frames += f;
    if (frames > 0) b.input_features = random_mm_tensor({frames, mel_bins}, 23, 1.0);
    b.image_grids = image_grids;
    b.video_grids = video_grids;
    b.audio_feature_lengths = audio_lengths;
    return b;
  }

  std::vector<VisionGrid> image_grids, video_grids;
  std::vector<int64_t> audio_lengths;

 private:
  enum Kind { Text, Image, Video, Audio };
  void push(int64_t id, int64_t t, int64_t h, int64_t w, Kind kind) {
    ids_.push_back(id);
    pos_[0].push_back(t);
    pos_[1].push_back(h);
    pos_[2].push_back(w);
    kinds_.push_back(kind);
  }
  // Only text tokens are predicted (as the chat data trains on answers).
  int64_t target_for(int64_t i) const {
    const auto next = static_cast<size_t>(i + 1);
    return kinds_[next] == Text ? ids_[next] : kIgnoreIndex;
  }
  std::vector<int64_t> rows_of(Kind kind) const {
    std::vector<int64_t> rows;
    for (size_t i = 0; i < kinds_.size(); ++i)
      if (kinds_[i] == kind) rows.push_back(static_cast<int64_t>(i));
    return rows;
  }

  int64_t vocab_;
  Rng rng_;
  int64_t next_ = 0;
  std::vector<int64_t> ids_;
  std::vector<int64_t> pos_[3];
  std::vector<Kind> kinds_;
  std::vector<int32_t> cu_;
};

// Two samples: an image (grid 1x4x4) inside text; then a video (2x4x4) for Qwen3-VL or an audio clip of 130 mel
// frames (two chunks) for Qwen3-Omni.
MultimodalBatch two_sample_batch(const ThinkerConfig& c) {
  PackedRowBuilder row(c.text.vocab_size, 3);
  row.begin_sample();
  row.text(3);
  row.visual({1, 4, 4}, false);
  row.text(5);
  row.begin_sample();
  row.text(2);
  if (c.has_audio) {
    row.audio(130, c.audio);
  } else {
    row.visual({2, 4, 4}, true);
  }
  row.text(4);
  return row.finish(c.has_audio, c.vision.patch_dim(), c.audio.num_mel_bins);
}

std::unique_ptr<MultimodalLM> make_multimodal_model(const ThinkerConfig& c, MultimodalOptions options = {}) {
  auto model = std::make_unique<MultimodalLM>(c, options);
  model->init_weights(17);
  // LayerNorm and RMSNorm weights start at one and biases at zero; move them so that their gradients are generic.
  Rng rng(29);
  for (const auto& p : model->params().all()) {
    const bool norm_or_bias = p->name.find("norm") != std::string::npos || p->name.find("ln_") != std::string::npos ||
                              p->name.find(".bias") != std::string::npos;
    if (!norm_or_bias) continue;
    float* v = p->value.data<float>();
    for (int64_t i = 0; i < p->value.numel(); ++i) v[i] += static_cast<float>(0.1 * gaussian(rng));
  }
  return model;
}

double multimodal_objective(MultimodalLM& model, const MultimodalBatch& batch, double ce_scale, double aux_scale) {
  const ForwardStats stats = model.forward(batch, false).stats;
  return ce_scale * stats.ce_sum + aux_scale * stats.aux_loss;
}

std::map<std::string, std::vector<float>> all_grads(MultimodalLM& model) {
  std::map<std::string, std::vector<float>> grads;
  for (const auto& p : model.params().all()) grads[p->name] = p->grad.to_float_vector();
  return grads;
}

bool all_zero(const std::vector<float>& values) {
  return std::all_of(values.begin(), values.end(), [](float v) { return v == 0.0f; });
}

// ------------------------------------------------------------------------------------------ names and groups

std::vector<std::string> group_names(MultimodalLM& model) {
  std::vector<std::string> names;
  for (const ParamGroup& g : model.params().groups()) names.push_back(g.name);
  return names;
}

void expect_param(MultimodalLM& model, const std::string& name, const Shape& shape) {
  Parameter* p = model.params().find(name);
  ASSERT_NE(p, nullptr) << name;
  EXPECT_EQ(p->shape, shape) << name;
}

TEST(MultimodalLmNames, Qwen3VlToy) {
  const ThinkerConfig c = multimodal_toy_config("qwen3_vl_toy");
  EXPECT_EQ(c.text.model_type, "qwen3");
  EXPECT_EQ(c.mrope_section, (std::vector<int64_t>{2, 3, 3}));
  EXPECT_FALSE(c.has_audio);
  MultimodalLM model(c, {});
  expect_param(model, "model.language_model.embed_tokens.weight", {151936, 64});
  expect_param(model, "model.language_model.layers.1.self_attn.q_proj.weight", {64, 64});
  expect_param(model, "model.language_model.layers.0.self_attn.k_norm.weight", {16});
  expect_param(model, "model.language_model.layers.0.mlp.down_proj.weight", {64, 128});
  expect_param(model, "model.language_model.norm.weight", {64});
  expect_param(model, "lm_head.weight", {151936, 64});
  expect_param(model, "model.visual.patch_embed.proj.weight", {32, 3, 2, 16, 16});
  expect_param(model, "model.visual.deepstack_merger_list.1.linear_fc2.weight", {64, 128});
  const std::vector<std::string> groups = group_names(model);
  ASSERT_GE(groups.size(), 4u);
  EXPECT_EQ(groups.front(), "visual.embed");
  EXPECT_EQ(std::vector<std::string>(groups.end() - 4, groups.end()),
            (std::vector<std::string>{"embed", "layers.0", "layers.1", "head"}));
  for (const std::string& g : groups) EXPECT_EQ(g.rfind("audio.", 0), std::string::npos) << g;
  for (const auto& p : model.params().all()) {
    ASSERT_TRUE(p->value.defined()) << p->name;
    EXPECT_EQ(p->value.shape(), p->shape) << p->name;
    const std::string& group = model.params().groups()[static_cast<size_t>(p->group)].name;
    EXPECT_EQ(p->name.rfind("model.visual.", 0) == 0, group.rfind("visual.", 0) == 0) << p->name << " in " << group;
  }
}

TEST(MultimodalLmNames, Qwen3VlMoeToy) {
  const ThinkerConfig c = multimodal_toy_config("qwen3_vl_moe_toy");
  EXPECT_EQ(c.text.model_type, "qwen3_moe");
  EXPECT_TRUE(c.text.norm_topk_prob);
  MultimodalLM model(c, {});
  expect_param(model, "model.language_model.layers.0.mlp.gate.weight", {8, 64});
  expect_param(model, "model.language_model.layers.1.mlp.experts.gate_up_proj", {8, 64, 64});
  expect_param(model, "model.language_model.layers.1.mlp.experts.down_proj", {8, 64, 32});
  expect_param(model, "lm_head.weight", {151936, 64});
  expect_param(model, "model.visual.merger.linear_fc1.weight", {128, 128});
}

TEST(MultimodalLmNames, Qwen3OmniMoeToy) {
  const ThinkerConfig c = multimodal_toy_config("qwen3_omni_moe_toy");
  EXPECT_EQ(c.text.model_type, "qwen3_moe");
  EXPECT_EQ(c.mrope_section, (std::vector<int64_t>{4, 2, 2}));
  EXPECT_TRUE(c.text.output_router_logits);
  ASSERT_TRUE(c.has_audio);
  MultimodalLM model(c, {});
  ASSERT_NE(model.audio(), nullptr);
  expect_param(model, "thinker.model.embed_tokens.weight", {151936, 64});
  expect_param(model, "thinker.model.layers.0.mlp.experts.gate_up_proj", {8, 64, 64});
  expect_param(model, "thinker.model.norm.weight", {64});
  expect_param(model, "thinker.lm_head.weight", {151936, 64});
  expect_param(model, "thinker.visual.merger_list.0.mlp.0.weight", {128, 128});
  expect_param(model, "thinker.audio_tower.conv2d1.weight", {8, 1, 3, 3});
  expect_param(model, "thinker.audio_tower.proj2.weight", {64, 32});
  const std::vector<std::string> groups = group_names(model);
  EXPECT_NE(std::find(groups.begin(), groups.end(), "audio.conv"), groups.end());
  EXPECT_NE(std::find(groups.begin(), groups.end(), "visual.merger"), groups.end());
  EXPECT_EQ(groups.back(), "head");
  std::set<std::string> prefixes;
  for (const auto& p : model.params().all()) prefixes.insert(p->name.substr(0, p->name.find('.', 8)));
  EXPECT_EQ(prefixes, (std::set<std::string>{"thinker.audio_tower", "thinker.lm_head", "thinker.model",
                                             "thinker.visual"}));
}

TEST(MultimodalLmNames, TextOnlyModelTypesAreRejected) {
  nlohmann::json j = read_json_file(std::string(VEOMNI_SOURCE_DIR) + "/configs/model_configs/qwen3_toy/config.json");
  EXPECT_THROW(thinker_config_from_json(j, "qwen3_toy"), InputError);
  nlohmann::json vl =
      read_json_file(std::string(VEOMNI_SOURCE_DIR) + "/configs/model_configs/qwen3_vl_toy/config.json");
  vl["vision_config"]["out_hidden_size"] = 32;
  EXPECT_THROW(thinker_config_from_json(vl, "qwen3_vl_toy"), InputError);
}

// ------------------------------------------------------------------------------------------ gradients

// Central differences in f32 (step 3e-3, tolerance 1e-4 + 2e-3 |fd|: the loss is of order 5, its f32 rounding over
// the step about 3e-5) against the analytic gradient, for the largest entry, one random non-zero entry and one
// random entry of every parameter, the vision and audio ones included. A probe whose difference changes with the
// step size straddles a routing flip (top-k is discontinuous) and is skipped; at most three may.
void expect_mm_gradients_match_finite_differences(const std::string& toy, float aux_scale) {
  const ThinkerConfig c = small_vocab_config(toy);
  auto model = make_multimodal_model(c);
  const MultimodalBatch batch = two_sample_batch(c);
  const double ce_scale = 1.0 / static_cast<double>(batch.text.valid_tokens);
  model->params().zero_grads();
  model->backward(model->forward(batch, true), static_cast<float>(ce_scale), aux_scale);

  // The media rows overwrite the token embedding of id 0: that row gets no gradient, and changing it changes nothing.
  Parameter& embed = model->params().at(c.text_prefix + "embed_tokens.weight");
  const std::vector<float> embed_grad = embed.grad.to_float_vector();
  EXPECT_TRUE(all_zero(std::vector<float>(embed_grad.begin(), embed_grad.begin() + c.text.hidden_size)));
  {
    float* v = embed.value.data<float>();
    const float original = v[3];
    const double before = multimodal_objective(*model, batch, ce_scale, aux_scale);
    v[3] = original + 0.5f;
    EXPECT_EQ(multimodal_objective(*model, batch, ce_scale, aux_scale), before);
    v[3] = original;
  }

  const double h = 3e-3;
  Rng rng(5);
  int probes = 0, kinks = 0;
  for (const auto& p : model->params().all()) {
    const std::vector<float> grad = p->grad.to_float_vector();
    std::vector<size_t> nonzero;
    size_t largest = 0;
    for (size_t i = 0; i < grad.size(); ++i) {
      if (grad[i] != 0.0f) nonzero.push_back(i);
      if (std::fabs(grad[i]) > std::fabs(grad[largest])) largest = i;
    }
    // q.(k + b) shifts all scores of a query alike, which softmax ignores: the audio k_proj bias has no gradient.
    if (p->name.find("k_proj.bias") == std::string::npos) {
      EXPECT_GT(std::fabs(grad[largest]), 1e-7) << p->name << " has a vanishing gradient: the check proves nothing";
    }
    std::vector<size_t> picks = {largest, static_cast<size_t>(rng.uniform_int(grad.size()))};
    if (!nonzero.empty()) picks.push_back(nonzero[rng.uniform_int(nonzero.size())]);
    for (size_t i : picks) {
      float* v = p->value.data<float>() + i;
      auto difference = [&](double step) {
        const float original = *v;
        *v = static_cast<float>(original + step);
        const double plus = multimodal_objective(*model, batch, ce_scale, aux_scale);
        *v = static_cast<float>(original - step);
        const double minus = multimodal_objective(*model, batch, ce_scale, aux_scale);
        *v = original;
        return (plus - minus) / (2 * step);
      };
      ++probes;
      const double fd = difference(h);
      const double tolerance = 1e-4 + 2e-3 * std::fabs(fd);
      if (std::fabs(grad[i] - fd) <= tolerance) continue;
      const double fd_small = difference(h / 4);
      if (std::fabs(fd - fd_small) > 1e-2 + 0.05 * std::fabs(fd_small)) {
        ++kinks;
        continue;
      }
      EXPECT_NEAR(grad[i], fd, tolerance) << p->name << "[" << i << "]";
    }
  }
  EXPECT_GE(probes, 3 * static_cast<int>(model->params().all().size()));
  EXPECT_LE(kinks, 3) << "of " << probes << " probes, too many hit a routing flip";
}

TEST(MultimodalLmGradients, Qwen3VlImageAndVideo) {
  expect_mm_gradients_match_finite_differences("qwen3_vl_toy", 0.0f);
}

TEST(MultimodalLmGradients, Qwen3VlMoeImageAndVideo) {
  expect_mm_gradients_match_finite_differences("qwen3_vl_moe_toy", 0.0f);
}

TEST(MultimodalLmGradients, Qwen3OmniImageAndAudioWithAuxLoss) {
  expect_mm_gradients_match_finite_differences("qwen3_omni_moe_toy", 0.5f);
}

// ------------------------------------------------------------------------------------------ text-only path

// Without media the model is the plain LM: loss and every gradient equal the text body's SFT pass bitwise.
TEST(MultimodalLmTextOnly, EqualsTheLanguageModelPath) {
  const ThinkerConfig c = small_vocab_config("qwen3_omni_moe_toy");
  auto model = make_multimodal_model(c);
  PackedRowBuilder row(c.text.vocab_size, 8);
  row.begin_sample();
  row.text(7);
  row.begin_sample();
  row.text(6);
  const MultimodalBatch batch = row.finish(true, c.vision.patch_dim(), c.audio.num_mel_bins);

  model->params().zero_grads();
  SftPass mm_pass = model->forward(batch, true);
  const ForwardStats mm = mm_pass.stats;
  model->backward(std::move(mm_pass), 0.1f, 0.5f);
  const auto mm_grads = all_grads(*model);

  model->params().zero_grads();
  SftPass text_pass = sft_forward(model->language_model(), model->head(), batch, true);  // the text body alone
  const ForwardStats lm = text_pass.stats;
  sft_backward(model->language_model(), model->head(), std::move(text_pass), 0.1f, 0.5f);
  EXPECT_EQ(mm.ce_sum, lm.ce_sum);
  EXPECT_EQ(mm.aux_loss, lm.aux_loss);
  EXPECT_EQ(mm.valid_tokens, lm.valid_tokens);
  for (const auto& [name, grad] : all_grads(*model)) {
    EXPECT_EQ(grad, mm_grads.at(name)) << name;
    if (name.rfind("thinker.visual.", 0) == 0 || name.rfind("thinker.audio_tower.", 0) == 0) {
      EXPECT_TRUE(all_zero(grad)) << name;
    }
  }
}

// A text-only sample packed after an image sample keeps the logits it has alone (attention is bounded per sample,
// and the deepstack additions touch only visual rows).
TEST(MultimodalLmTextOnly, TextSamplePackedAfterImageKeepsItsLogits) {
  const ThinkerConfig c = small_vocab_config("qwen3_vl_toy");
  auto model = make_multimodal_model(c);
  PackedRowBuilder both(c.text.vocab_size, 4);
  both.begin_sample();
  both.text(2);
  both.visual({1, 4, 4}, false);
  both.text(3);
  both.begin_sample();
  both.text(6);
  const MultimodalBatch packed = both.finish(false, c.vision.patch_dim(), 128);

  MultimodalBatch alone;
  const int64_t start = packed.text.cu_seqlens[1], s = packed.text.input_ids.numel();
  alone.text.input_ids = packed.text.input_ids.slice(start, s).clone();
  alone.text.target_ids = packed.text.target_ids.slice(start, s).clone();
  Tensor pos = Tensor::empty({3, s - start}, DType::I64);
  for (int64_t k = 0; k < 3; ++k) pos.select(k).copy_from(packed.text.position_ids.select(k).slice(start, s));
  alone.text.position_ids = pos;
  alone.text.cu_seqlens = {0, static_cast<int32_t>(s - start)};

  Tensor logits_packed, logits_alone;
  model->forward(packed, false, &logits_packed);
  model->forward(alone, false, &logits_alone);
  EXPECT_LE(testing::relative_error(logits_packed.slice(start, s), logits_alone), 1e-5);
}

// ------------------------------------------------------------------------------------------ saved values

// Another Omni batch than two_sample_batch: other grids, another clip, other lengths.
MultimodalBatch other_batch(const ThinkerConfig& c) {
  PackedRowBuilder row(c.text.vocab_size, 5);
  row.begin_sample();
  row.text(2);
  row.visual({1, 4, 8}, false);
  row.text(3);
  row.audio(60, c.audio);
  row.text(2);
  return row.finish(true, c.vision.patch_dim(), c.audio.num_mel_bins);
}

Tensor hidden_grad(const ThinkerConfig& c, const MultimodalBatch& batch, uint64_t seed) {
  return random_mm_tensor({batch.text.input_ids.numel(), c.text.hidden_size}, seed, 0.1);
}

TEST(MultimodalBodySaved, BackwardWithoutSavedForwardIsAnInternalError) {
  const ThinkerConfig c = small_vocab_config("qwen3_omni_moe_toy");
  auto model = make_multimodal_model(c);
  MultimodalBody& body = model->body();
  const MultimodalBatch batch = two_sample_batch(c);
  const Tensor d_hidden = hidden_grad(c, batch, 41);
  const std::vector<std::string> message{"multimodal body backward without the saved values"};
  BodyOutput unsaved = body.forward(batch, false);
  EXPECT_EQ(unsaved.saved, nullptr);
  testing::expect_internal_error([&] { body.backward(std::move(unsaved.saved), d_hidden.clone(), 0.5f); }, message);
  // A text body's saved values are not the multimodal body's.
  testing::expect_internal_error([&] { body.backward(std::make_unique<TextBodySaved>(), d_hidden.clone(), 0.5f); },
                                 message);
  BodyOutput out = body.forward(batch, true);
  body.backward(std::move(out.saved), d_hidden.clone(), 0.5f);
  EXPECT_EQ(out.saved, nullptr);
  testing::expect_internal_error([&] { body.backward(std::move(out.saved), d_hidden.clone(), 0.5f); }, message);
}

// Two forwards, then their backwards in reverse order: each backward gives exactly the gradients of its own
// forward/backward pair (every parameter: text body, vision tower, audio encoder), so the body keeps no state of a
// forward outside its saved value. Compared one backward at a time, from zero gradients.
TEST(MultimodalBodySaved, InterleavedForwardsAndReversedBackwardsMatchSeparatePairs) {
  const ThinkerConfig c = small_vocab_config("qwen3_omni_moe_toy");
  auto model = make_multimodal_model(c);
  MultimodalBody& body = model->body();
  const MultimodalBatch batch_a = two_sample_batch(c), batch_b = other_batch(c);
  const Tensor d_a = hidden_grad(c, batch_a, 42), d_b = hidden_grad(c, batch_b, 43);
  auto pair = [&](const MultimodalBatch& batch, const Tensor& d_hidden) {
    model->params().zero_grads();
    body.backward(body.forward(batch, true).saved, d_hidden.clone(), 0.5f);
    return all_grads(*model);
  };
  const auto grads_a = pair(batch_a, d_a), grads_b = pair(batch_b, d_b);
  ASSERT_NE(grads_a, grads_b);

  BodyOutput out_a = body.forward(batch_a, true);
  BodyOutput out_b = body.forward(batch_b, true);
  model->params().zero_grads();
  body.backward(std::move(out_b.saved), d_b.clone(), 0.5f);
  EXPECT_EQ(all_grads(*model), grads_b);
  model->params().zero_grads();
  body.backward(std::move(out_a.saved), d_a.clone(), 0.5f);
  EXPECT_EQ(all_grads(*model), grads_a);
}

// The LM's forward returns the pass and backward consumes it: a pass without saved values (a loss-only forward, or
// one a backward already consumed) is an internal error.
TEST(MultimodalLmPass, BackwardOfAnEmptyPassIsAnInternalError) {
  const ThinkerConfig c = small_vocab_config("qwen3_omni_moe_toy");
  auto model = make_multimodal_model(c);
  const MultimodalBatch batch = two_sample_batch(c);
  const std::vector<std::string> message{"backward of a pass without saved values"};
  SftPass loss_only = model->forward(batch, false);
  EXPECT_EQ(loss_only.body, nullptr);
  testing::expect_internal_error([&] { model->backward(std::move(loss_only), 0.1f, 0.5f); }, message);
  SftPass pass = model->forward(batch, true);
  model->backward(std::move(pass), 0.1f, 0.5f);
  EXPECT_EQ(pass.body, nullptr) << "backward consumes the pass";
  testing::expect_internal_error([&] { model->backward(std::move(pass), 0.1f, 0.5f); }, message);
}

// The same through the LM (head included): two forwards, then their backwards in reverse order, each giving exactly
// its own pair's gradients and statistics. Compared one backward at a time, from zero gradients.
TEST(MultimodalLmPass, TwoForwardsThenReversedBackwardsMatchSeparatePairs) {
  const ThinkerConfig c = small_vocab_config("qwen3_omni_moe_toy");
  auto model = make_multimodal_model(c);
  const MultimodalBatch batch_a = two_sample_batch(c), batch_b = other_batch(c);
  auto pair = [&](const MultimodalBatch& batch, ForwardStats& stats) {
    model->params().zero_grads();
    SftPass pass = model->forward(batch, true);
    stats = pass.stats;
    model->backward(std::move(pass), 0.1f, 0.5f);
    return all_grads(*model);
  };
  ForwardStats stats_a, stats_b;
  const auto grads_a = pair(batch_a, stats_a), grads_b = pair(batch_b, stats_b);
  ASSERT_NE(grads_a, grads_b);

  SftPass pass_a = model->forward(batch_a, true);
  SftPass pass_b = model->forward(batch_b, true);
  EXPECT_EQ(pass_a.stats.ce_sum, stats_a.ce_sum);
  EXPECT_EQ(pass_a.stats.aux_loss, stats_a.aux_loss);
  EXPECT_EQ(pass_b.stats.ce_sum, stats_b.ce_sum);
  EXPECT_EQ(pass_b.stats.aux_loss, stats_b.aux_loss);
  model->params().zero_grads();
  model->backward(std::move(pass_b), 0.1f, 0.5f);
  EXPECT_EQ(all_grads(*model), grads_b);
  model->params().zero_grads();
  model->backward(std::move(pass_a), 0.1f, 0.5f);
  EXPECT_EQ(all_grads(*model), grads_a);
}

// ------------------------------------------------------------------------------------------ freezing

void expect_freezing_drops_exactly_the_tower(bool freeze_vit, bool freeze_audio) {
  const ThinkerConfig c = small_vocab_config("qwen3_omni_moe_toy");
  const MultimodalBatch batch = two_sample_batch(c);
  auto free_model = make_multimodal_model(c);
  free_model->params().zero_grads();
  SftPass pass_a = free_model->forward(batch, true);
  const ForwardStats a = pass_a.stats;
  free_model->backward(std::move(pass_a), 0.1f, 0.5f);
  const auto free_grads = all_grads(*free_model);

  MultimodalOptions options;
  options.freeze_vit = freeze_vit;
  options.freeze_audio_tower = freeze_audio;
  auto frozen = make_multimodal_model(c, options);
  frozen->params().zero_grads();
  SftPass pass_b = frozen->forward(batch, true);
  const ForwardStats b = pass_b.stats;
  frozen->backward(std::move(pass_b), 0.1f, 0.5f);
  EXPECT_EQ(a.ce_sum, b.ce_sum);
  for (const auto& [name, grad] : all_grads(*frozen)) {
    const bool vision = name.rfind("thinker.visual.", 0) == 0, audio = name.rfind("thinker.audio_tower.", 0) == 0;
    if ((vision && freeze_vit) || (audio && freeze_audio)) {
      EXPECT_TRUE(all_zero(grad)) << name;
      EXPECT_FALSE(all_zero(free_grads.at(name))) << name;
    } else {
      EXPECT_EQ(grad, free_grads.at(name)) << name;
    }
  }
}

TEST(MultimodalLmFreeze, FreezeVit) { expect_freezing_drops_exactly_the_tower(true, false); }
TEST(MultimodalLmFreeze, FreezeAudioTower) { expect_freezing_drops_exactly_the_tower(false, true); }
TEST(MultimodalLmFreeze, FreezeBoth) { expect_freezing_drops_exactly_the_tower(true, true); }

// ------------------------------------------------------------------------------------------ bad inputs

TEST(MultimodalLmInputs, MaskCountsMustMatchTheEncoders) {
  const ThinkerConfig c = small_vocab_config("qwen3_omni_moe_toy");
  auto model = make_multimodal_model(c);
  const MultimodalBatch good = two_sample_batch(c);
  const int64_t s = good.text.input_ids.numel();
  auto without_first = [&](const Tensor& mask) {
    Tensor m = mask.clone();
    auto* flags = static_cast<uint8_t*>(m.raw_data());
    for (int64_t i = 0; i < s; ++i)
      if (flags[i]) {
        flags[i] = 0;
        break;
      }
    return m;
  };
  MultimodalBatch b = good;
  b.image_mask = without_first(good.image_mask);
  EXPECT_THROW(model->forward(b, true), InputError);
  b = good;
  b.audio_mask = without_first(good.audio_mask);
  EXPECT_THROW(model->forward(b, true), InputError);
  b = good;
  b.audio_feature_lengths.back() += 100;  // more frames than input_features holds, and more tokens than the mask
  EXPECT_THROW(model->forward(b, true), InputError);
  b = good;
  b.video_mask = good.image_mask;  // video tokens without video grids
  EXPECT_THROW(model->forward(b, true), InputError);
  b = good;
  b.image_mask = good.image_mask.to_dtype(DType::F32);
  EXPECT_THROW(model->forward(b, true), InputError);
  b = good;
  b.image_grids = {{1, 4, 8}};  // 8 merged tokens for a mask of 4
  EXPECT_THROW(model->forward(b, true), InputError);
  // The good batch still runs after the rejected ones.
  EXPECT_NO_THROW(model->forward(good, true));
}

TEST(MultimodalLmInputs, OverlappingMasksAndAudioWithoutEncoder) {
  const ThinkerConfig omni = small_vocab_config("qwen3_omni_moe_toy");
  auto model = make_multimodal_model(omni);
  MultimodalBatch b = two_sample_batch(omni);
  Tensor both = b.audio_mask.clone();
  static_cast<uint8_t*>(both.raw_data())[static_cast<size_t>(mask_positions(b.image_mask, both.numel(), "m")[0])] = 1;
  b.image_mask = both;
  b.audio_mask = both;
  EXPECT_THROW(model->forward(b, true), InputError);

  const ThinkerConfig vl = small_vocab_config("qwen3_vl_toy");
  auto vl_model = make_multimodal_model(vl);
  MultimodalBatch with_audio = two_sample_batch(omni);
  with_audio.text.position_ids = with_audio.text.position_ids.to_dtype(DType::I64);
  EXPECT_THROW(vl_model->forward(with_audio, true), InputError);
}

}  // namespace
}  // namespace veomni
