// LoRA adapters in the models: the adapters' gradients against the chain rule through the merged weight
// W' = W + scale * B A (dense, MoE experts independent and shared, the Qwen3-VL towers; q/k/v also packed into one
// GEMM, as a frozen base pooled by FSDP on one rank runs them), adapters off equal to the base model, the frozen base
// without gradients, adapter names and init, and the lora_modules errors.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "io/hf_checkpoint.h"
#include "model/audio/audio_layout.h"
#include "model/layers/lora_adapter.h"
#include "parallel/fsdp.h"
#include "tests/unit/test_ckpt_util.h"
#include "model/sft_pass.h"
#include "tests/common/expect_error.h"
#include "tests/unit/test_model_util.h"
#include "train/train_model.h"

namespace veomni {
namespace {

LoraConfig lora(std::vector<std::string> modules, bool shared = false) {
  LoraConfig c;
  c.rank = 2;
  c.alpha = 3;  // scale 1.5: a wrong or missing scale shows in every comparison
  c.lora_modules = std::move(modules);
  c.share_expert_lora = shared;
  return c;
}

ModelOptions options_with(const LoraConfig& config, bool recompute = false) {
  ModelOptions options;
  options.lora_config = config;
  options.recompute = recompute;
  return options;
}

// A toy multimodal model (qwen3_vl_toy, qwen3_omni_moe_toy) with a small vocabulary.
ThinkerConfig thinker_config(const std::string& name) {
  ThinkerConfig c = load_thinker_config(std::string(VEOMNI_SOURCE_DIR) + "/configs/model_configs/" + name);
  c.text.vocab_size = 300;
  c.text.initializer_range = 0.1;
  return c;
}

std::unique_ptr<TrainModel> make_lora_model(const ModelConfig* text, const ThinkerConfig* vl,
                                            const LoraConfig& config, bool recompute = false) {
  auto model = text ? std::make_unique<TrainModel>(*text, options_with(config, recompute))
                    : std::make_unique<TrainModel>(*vl, options_with(config, recompute), false);
  model->init_weights(7);
  return model;
}

void fill_random(Tensor& t, uint64_t seed, double scale) {
  Rng rng(seed);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(scale * (2.0 * rng.uniform() - 1.0));
}

// B is zero at init, which would hide any error in dA: give every B (and, for generic gradients, the norms) values.
void perturb_adapters(TrainModel& model) {
  uint64_t seed = 100;
  for (const Parameter* p : model.lora_params())
    if (p->name.ends_with(".lora_B.weight")) fill_random(const_cast<Parameter*>(p)->value, seed++, 0.3);
}

// One packed text row (two sequences), or the Qwen3-VL row: text, a 1x4x4 image (4 merged rows), text.
MultimodalBatch text_batch(int64_t vocab) {
  MultimodalBatch b;
  b.text = test::packed_batch({7, 5}, vocab, 11);
  return b;
}

Tensor span_mask_of(int64_t s, int64_t begin, int64_t end) {
  Tensor mask = Tensor::zeros({s}, DType::Bool);
  for (int64_t i = begin; i < end; ++i) static_cast<uint8_t*>(mask.raw_data())[i] = 1;
  return mask;
}

// One sequence: 3 text tokens, the media rows (a 1x4x4 image, 4 merged rows; or Qwen3-Omni audio of 130 mel frames),
// 5 text tokens; M-RoPE positions as get_rope_index lays them out (float for Omni).
MultimodalBatch media_batch(const ThinkerConfig& c, bool audio) {
  const int64_t media = audio ? audio_layout({130}, c.audio).num_tokens() : 4, s = 8 + media;
  std::vector<int64_t> ids(static_cast<size_t>(s), 0);
  const std::vector<int64_t> text = {5, 9, 4, 17, 3, 8, 22, 6};
  for (int64_t i = 0; i < 3; ++i) ids[static_cast<size_t>(i)] = text[static_cast<size_t>(i)];
  for (int64_t i = 0; i < 5; ++i) ids[static_cast<size_t>(3 + media + i)] = text[static_cast<size_t>(3 + i)];
  std::vector<int64_t> targets(ids.size(), kIgnoreIndex);
  for (size_t i = 0; i + 1 < ids.size(); ++i)
    if (ids[i + 1] != 0) targets[i] = ids[i + 1];
  std::vector<float> t, h, w;
  for (int64_t i = 0; i < 3; ++i) t.push_back(static_cast<float>(i)), h.push_back(t.back()), w.push_back(t.back());
  for (int64_t i = 0; i < media; ++i) {
    t.push_back(static_cast<float>(3 + (audio ? i : 0)));
    h.push_back(static_cast<float>(3 + (audio ? i : i / 2)));
    w.push_back(static_cast<float>(3 + (audio ? i : i % 2)));
  }
  const int64_t next = audio ? 3 + media : 5;
  for (int64_t i = 0; i < 5; ++i)
    t.push_back(static_cast<float>(next + i)), h.push_back(t.back()), w.push_back(t.back());
  std::vector<float> positions = t;
  positions.insert(positions.end(), h.begin(), h.end());
  positions.insert(positions.end(), w.begin(), w.end());
  MultimodalBatch b;
  b.text.input_ids = Tensor::from_vector(ids, {s});
  b.text.target_ids = Tensor::from_vector(targets, {s});
  b.text.position_ids = audio ? Tensor::from_vector(positions, {3, s})
                              : Tensor::from_vector(std::vector<int64_t>(positions.begin(), positions.end()), {3, s});
  b.text.cu_seqlens = {0, static_cast<int32_t>(s)};
  for (int64_t target : targets) b.text.valid_tokens += target != kIgnoreIndex;
  b.image_mask = span_mask_of(s, 3, audio ? 3 : 3 + media);
  b.video_mask = span_mask_of(s, 0, 0);
  b.audio_mask = span_mask_of(s, 3, audio ? 3 + media : 3);
  if (audio) {
    b.input_features = Tensor::empty({130, c.audio.num_mel_bins}, DType::F32);
    fill_random(b.input_features, 23, 1.0);
    b.audio_feature_lengths = {130};
  } else {
    b.pixel_values = Tensor::empty({16, c.vision.patch_dim()}, DType::F32);
    fill_random(b.pixel_values, 21, 1.0);
    b.image_grids = {{1, 4, 4}};
  }
  return b;
}

// Loss of one micro-batch (cross-entropy sum + aux_scale * aux loss) with its backward into zeroed gradients.
double loss_and_grads(TrainModel& model, const MultimodalBatch& batch, float aux_scale) {
  model.params().zero_grads();
  SftPass pass = sft_forward(model.body(), model.lm_head(), batch, true);
  const double loss = pass.stats.ce_sum + aux_scale * pass.stats.aux_loss;
  sft_backward(model.body(), model.lm_head(), std::move(pass), 1.0f, aux_scale);
  return loss;
}

std::vector<float> weight_values(const Tensor& t) { return t.to(Device::cpu()).to_float_vector(); }

bool all_zero_tensor(const Tensor& t) {
  for (float v : weight_values(t))
    if (v != 0.0f) return false;
  return true;
}

// The adapter's module parts viewed per expert: W [E, out, in], A [E or 1, r, in], B [E or 1, out, r].
struct AdapterView {
  int64_t experts, out, in, rank;
  bool shared;  // one A and B for every expert
};

AdapterView view_of(const Parameter& w, const Parameter& a) {
  const bool stacked = w.shape.size() == 3;
  AdapterView v;
  v.experts = stacked ? w.shape[0] : 1;
  v.out = w.shape[stacked ? 1 : 0];
  v.in = w.shape[stacked ? 2 : 1];
  v.rank = a.shape[a.shape.size() - 2];
  v.shared = a.shape.size() == 2;
  return v;
}

// W'_e = W_e + scale * B_e A_e.
std::vector<float> merged(const std::vector<float>& w, const std::vector<float>& a, const std::vector<float>& b,
                          const AdapterView& v, double scale) {
  std::vector<float> out = w;
  for (int64_t e = 0; e < v.experts; ++e) {
    const int64_t ea = v.shared ? 0 : e;
    for (int64_t o = 0; o < v.out; ++o)
      for (int64_t i = 0; i < v.in; ++i) {
        double sum = 0;
        for (int64_t k = 0; k < v.rank; ++k)
          sum += b[static_cast<size_t>((ea * v.out + o) * v.rank + k)] * a[static_cast<size_t>((ea * v.rank + k) * v.in + i)];
        out[static_cast<size_t>((e * v.out + o) * v.in + i)] += static_cast<float>(scale * sum);
      }
  }
  return out;
}

// The chain rule through W': dA_e = scale * B_e^T dW'_e, dB_e = scale * dW'_e A_e^T (summed over experts if shared).
void expected_adapter_grads(const std::vector<float>& dw, const std::vector<float>& a, const std::vector<float>& b,
                            const AdapterView& v, double scale, std::vector<double>& da, std::vector<double>& db) {
  da.assign(a.size(), 0.0);
  db.assign(b.size(), 0.0);
  for (int64_t e = 0; e < v.experts; ++e) {
    const int64_t ea = v.shared ? 0 : e;
    for (int64_t o = 0; o < v.out; ++o)
      for (int64_t i = 0; i < v.in; ++i) {
        const double g = dw[static_cast<size_t>((e * v.out + o) * v.in + i)];
        for (int64_t k = 0; k < v.rank; ++k) {
          const auto ai = static_cast<size_t>((ea * v.rank + k) * v.in + i);
          const auto bi = static_cast<size_t>((ea * v.out + o) * v.rank + k);
          da[ai] += scale * b[bi] * g;
          db[bi] += scale * g * a[ai];
        }
      }
  }
}

void expect_close_to_reference(const std::vector<float>& got, const std::vector<double>& want,
                               const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_ref = std::max(max_ref, std::abs(want[i]));
    max_diff = std::max(max_diff, std::abs(got[i] - want[i]));
  }
  EXPECT_GT(max_ref, 0.0) << what << ": a zero gradient proves nothing";
  EXPECT_LE(max_diff, 1e-4 * max_ref + 1e-9) << what << " (largest reference " << max_ref << ")";
}

// Per layer of the language model, the weights of `projections` (e.g. "self_attn.q_proj"), in that order; layers
// without all of them (a sparse layer's MLP) are left out.
std::vector<std::vector<Parameter*>> layer_weights(TrainModel& model, const std::vector<std::string>& projections) {
  std::vector<std::vector<Parameter*>> layers;
  for (int64_t l = 0; l < 64; ++l) {
    std::vector<Parameter*> found;
    for (const std::string& proj : projections)
      for (const auto& p : model.params().all())
        if (p->name.ends_with(fmt::format("layers.{}.{}.weight", l, proj)) &&
            p->name.find("audio") == std::string::npos)
          found.push_back(p.get());
    if (found.size() == projections.size()) layers.push_back(found);
  }
  return layers;
}

const std::vector<std::string> kQkv = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"};
const std::vector<std::string> kGateUp = {"mlp.gate_proj", "mlp.up_proj"};

// Moves every layer's q/k/v weights and its gate/up weights into consecutive rows of one buffer each (same values),
// as FSDP lays out a frozen base on one rank: the layers then run each set as one GEMM (PackedLinears).
void pack_projections(TrainModel& model) {
  for (const auto& set : {kQkv, kGateUp}) {
    const auto layers = layer_weights(model, set);
    ASSERT_FALSE(layers.empty());
    for (const auto& weights : layers) {
      int64_t rows = 0;
      for (const Parameter* p : weights) rows += p->value.dim(0);
      Tensor buffer = Tensor::empty({rows, weights[0]->value.dim(1)}, weights[0]->value.dtype());
      int64_t row = 0;
      for (Parameter* p : weights) {
        Tensor part = buffer.slice(row, row + p->value.dim(0));
        part.copy_from(p->value);
        row += p->value.dim(0);
        p->value = part;
      }
    }
  }
}

// The LoRA model's adapter gradients equal the chain rule through the merged weights of a model without LoRA whose
// every parameter trains; the losses are equal; the frozen base gets no gradient. packed: the LoRA model's q/k/v
// weights share one buffer per layer, and so do its gate/up weights (pack_projections). recompute: the LoRA model's
// layers recompute their forward in backward.
void expect_chain_rule(const ModelConfig* text, const ThinkerConfig* vl, const LoraConfig& config,
                       const MultimodalBatch& batch, float aux_scale, size_t min_adapters, bool packed = false,
                       bool recompute = false) {
  auto with_lora = make_lora_model(text, vl, config, recompute);
  perturb_adapters(*with_lora);
  if (packed) pack_projections(*with_lora);
  auto merged_model = make_lora_model(text, vl, LoraConfig{});
  const double scale = config.scale();
  ASSERT_GE(with_lora->lora_params().size(), 2 * min_adapters);
  for (const auto& p : merged_model->params().all()) {
    Parameter& source = with_lora->params().at(p->name);
    p->value.copy_from(source.value);
  }
  std::map<std::string, AdapterView> modules;  // the base weight's name -> its adapter's view
  for (const Parameter* a : with_lora->lora_params()) {
    if (!a->name.ends_with(".lora_A.weight")) continue;
    const std::string module = a->name.substr(0, a->name.size() - std::string(".lora_A.weight").size());
    Parameter* w = merged_model->params().find(module + ".weight");
    if (!w) w = &merged_model->params().at(module);  // an expert tensor
    const AdapterView v = view_of(*w, *a);
    const Parameter& b = with_lora->params().at(module + ".lora_B.weight");
    w->value.copy_from(Tensor::from_vector(
        merged(weight_values(w->value), weight_values(a->value), weight_values(b.value), v, scale), w->value.shape()));
    modules.emplace(w->name, v);
  }
  const double loss = loss_and_grads(*with_lora, batch, aux_scale);
  const double merged_loss = loss_and_grads(*merged_model, batch, aux_scale);
  EXPECT_NEAR(loss, merged_loss, 1e-5 * std::abs(merged_loss));

  for (const auto& [name, v] : modules) {
    const std::string module = name.ends_with(".weight") ? name.substr(0, name.size() - 7) : name;
    const Parameter& a = with_lora->params().at(module + ".lora_A.weight");
    const Parameter& b = with_lora->params().at(module + ".lora_B.weight");
    std::vector<double> da, db;
    expected_adapter_grads(weight_values(merged_model->params().at(name).grad), weight_values(a.value),
                           weight_values(b.value), v, scale, da, db);
    ASSERT_TRUE(a.grad.defined() && b.grad.defined()) << module;
    expect_close_to_reference(weight_values(a.grad), da, a.name);
    expect_close_to_reference(weight_values(b.grad), db, b.name);
  }
  for (const auto& p : with_lora->params().all()) {
    if (!p->trainable) {
      EXPECT_FALSE(p->grad.defined()) << p->name << " is frozen but has a gradient";
    }
  }
}

const std::vector<std::string> kLanguageModules = {"q_proj", "k_proj", "v_proj", "o_proj",
                                                   "gate_proj", "up_proj", "down_proj"};

TEST(LoraChainRule, DenseAttentionAndMlp) {
  const ModelConfig c = test::tiny_dense_config(false);
  expect_chain_rule(&c, nullptr, lora(kLanguageModules), text_batch(c.vocab_size), 0.0f, 14);
}

TEST(LoraChainRule, DenseAttentionAndMlpWithPackedProjections) {
  const ModelConfig c = test::tiny_dense_config(false);
  expect_chain_rule(&c, nullptr, lora(kLanguageModules), text_batch(c.vocab_size), 0.0f, 14, true);
  // One adapter of a packed set: the block-diagonal B holds q_proj's (or up_proj's) alone.
  expect_chain_rule(&c, nullptr, lora({"q_proj", "up_proj", "down_proj"}), text_batch(c.vocab_size), 0.0f, 6, true);
  // With recomputation the backward packs again from the layer's saved input.
  expect_chain_rule(&c, nullptr, lora(kLanguageModules), text_batch(c.vocab_size), 0.0f, 14, true, true);
}

TEST(LoraChainRule, MoeIndependentExperts) {
  const ModelConfig c = test::tiny_moe_config(false);
  // 3 layers x 4 attention projections, the dense layer's 3 MLP projections, 2 sparse layers x 2 expert tensors.
  expect_chain_rule(&c, nullptr, lora(kLanguageModules), text_batch(c.vocab_size), 0.01f, 19);
}

TEST(LoraChainRule, MoeSharedExperts) {
  const ModelConfig c = test::tiny_moe_config(true);
  expect_chain_rule(&c, nullptr, lora(kLanguageModules, true), text_batch(c.vocab_size), 0.01f, 19);
}

TEST(LoraChainRule, Qwen3VlVisionTowerAndLanguageModel) {
  const ThinkerConfig c = thinker_config("qwen3_vl_toy");
  // Every vision block's attention and MLP, the mergers' linear_fc1 (linear_fc1 matches them as in PEFT), and
  // the language model's v_proj and down_proj.
  expect_chain_rule(nullptr, &c, lora({"attn.qkv", "attn.proj", "linear_fc1", "mlp.linear_fc2", "v_proj", "down_proj"}),
                    media_batch(c, false), 0.0f, 4 * static_cast<size_t>(c.vision.depth) + 2);
}

TEST(LoraChainRule, Qwen3OmniAudioEncoderAndLanguageModel) {
  const ThinkerConfig c = thinker_config("qwen3_omni_moe_toy");
  // q_proj matches the audio encoder's attention and the language model's; out_proj, fc1 and proj1 are the
  // encoder's. Its convolutions and the vision tower stay frozen (the tower, without adapters, runs no backward).
  expect_chain_rule(nullptr, &c, lora({"q_proj", "out_proj", "fc1", "proj1"}), media_batch(c, true), 0.01f,
                    3 * static_cast<size_t>(c.audio.encoder_layers) + 1);
}

// FSDP on one rank carves a group's frozen shards out of one buffer in registration order, so each layer's q/k/v
// weights (their adapters, trainable, live elsewhere) are consecutive rows of it, and so are its gate/up weights: the
// layers pack them.
TEST(LoraModel, FsdpOnOneRankLaysEachLayersFrozenProjectionsOutConsecutively) {
  const ModelConfig c = test::tiny_dense_config(false);
  auto model = make_lora_model(&c, nullptr, lora(kLanguageModules));
  DeviceMesh mesh;
  mesh.shape = MeshShape{1, 1, 1};
  mesh.rank = 0;
  mesh.world = mesh.sp = mesh.ep = mesh.ep_fsdp = std::make_shared<test::LocalCommunicator>();
  std::vector<std::vector<Parameter*>> sets = layer_weights(*model, kQkv);
  for (const auto& gate_up : layer_weights(*model, kGateUp)) sets.push_back(gate_up);
  ASSERT_EQ(sets.size(), 2 * static_cast<size_t>(c.num_hidden_layers));
  std::vector<std::vector<float>> values;
  for (const auto& set : sets)
    for (const Parameter* p : set) values.push_back(weight_values(p->value));
  Fsdp fsdp(model->params(), mesh, DType::F32, DType::F32, true, false);
  size_t i = 0;
  for (const auto& set : sets) {
    std::vector<Tensor> parts;
    for (const Parameter* p : set) parts.push_back(p->value);
    EXPECT_TRUE(Tensor::join_rows(parts).defined()) << set[0]->name;
    for (const Parameter* p : set) EXPECT_EQ(weight_values(p->value), values[i++]) << p->name;
  }
}

TEST(LoraModel, AdaptersOffIsTheBaseModelExactly) {
  const ModelConfig c = test::tiny_moe_config(false);
  const MultimodalBatch batch = text_batch(c.vocab_size);
  auto with_lora = make_lora_model(&c, nullptr, lora(kLanguageModules));
  perturb_adapters(*with_lora);
  auto base = make_lora_model(&c, nullptr, LoraConfig{});
  auto logits = [&](TrainModel& model) {
    Tensor out;
    sft_forward(model.body(), model.lm_head(), batch, false, &out);
    return weight_values(out);
  };
  const std::vector<float> base_logits = logits(*base);
  EXPECT_TRUE(with_lora->adapters_enabled());
  EXPECT_NE(logits(*with_lora), base_logits);  // non-zero B changes the model
  with_lora->set_adapters_enabled(false);
  EXPECT_FALSE(with_lora->adapters_enabled());
  EXPECT_EQ(logits(*with_lora), base_logits);
  // Off, a backward gives the adapters no gradient.
  loss_and_grads(*with_lora, batch, 0.01f);
  for (const Parameter* p : with_lora->lora_params()) EXPECT_TRUE(all_zero_tensor(p->grad)) << p->name;
}

size_t index_of(ParamStore& store, const std::string& name) {
  for (size_t i = 0; i < store.all().size(); ++i)
    if (store.all()[i]->name == name) return i;
  ADD_FAILURE() << "no parameter " << name;
  return 0;
}

TEST(LoraModel, AdaptersFollowTheirWeightsAndOnlyTheyTrain) {
  const ModelConfig c = test::tiny_moe_config(false);
  auto model = make_lora_model(&c, nullptr, lora({"q_proj", "gate_proj", "up_proj", "down_proj"}));
  ParamStore& store = model->params();
  const std::string q = "model.layers.0.self_attn.q_proj";
  const size_t at = index_of(store, q + ".weight");
  EXPECT_EQ(store.all()[at + 1]->name, q + ".lora_A.weight");
  EXPECT_EQ(store.all()[at + 2]->name, q + ".lora_B.weight");
  EXPECT_EQ(store.at(q + ".lora_A.weight").shape, (Shape{2, 16}));
  EXPECT_EQ(store.at(q + ".lora_B.weight").shape, (Shape{32, 2}));
  EXPECT_EQ(store.at(q + ".lora_A.weight").group, store.at(q + ".weight").group);
  EXPECT_EQ(store.find("model.layers.0.self_attn.k_proj.lora_A.weight"), nullptr);
  // Independent expert adapters: [E, r, in] and [E, out, r], split over EP like the experts; the fused gate_up_proj,
  // selected through gate_proj and up_proj, has rank 2r (both projections' adapters, as PEFT makes it).
  const std::string gate_up = "model.layers.0.mlp.experts.gate_up_proj";
  EXPECT_EQ(store.all()[index_of(store, gate_up) + 1]->name, gate_up + ".lora_A.weight");
  EXPECT_EQ(store.at(gate_up + ".lora_A.weight").shape, (Shape{4, 4, 16}));
  EXPECT_EQ(store.at(gate_up + ".lora_B.weight").shape, (Shape{4, 16, 4}));
  EXPECT_TRUE(store.at(gate_up + ".lora_A.weight").is_expert);
  EXPECT_EQ(store.at("model.layers.2.mlp.experts.down_proj.lora_A.weight").shape, (Shape{4, 2, 8}));
  EXPECT_EQ(store.at("model.layers.2.mlp.experts.down_proj.lora_B.weight").shape, (Shape{4, 16, 2}));
  EXPECT_EQ(store.find("model.layers.0.mlp.gate.lora_A.weight"), nullptr);  // the router takes none
  EXPECT_NE(store.find("model.layers.1.mlp.gate_proj.lora_A.weight"), nullptr);  // the dense layer's MLP
  for (const auto& p : store.all()) EXPECT_EQ(p->trainable, is_lora_param_name(p->name)) << p->name;
  EXPECT_EQ(model->lora_params().size(), 2u * (3 + 3 + 2 * 2));

  auto shared = make_lora_model(&c, nullptr, lora({"gate_proj", "up_proj", "down_proj"}, true));
  EXPECT_EQ(shared->params().at(gate_up + ".lora_A.weight").shape, (Shape{4, 16}));
  EXPECT_EQ(shared->params().at(gate_up + ".lora_B.weight").shape, (Shape{16, 4}));
  EXPECT_FALSE(shared->params().at(gate_up + ".lora_A.weight").is_expert);

  // A value head is new: it trains with the adapters.
  TrainModel value(c, options_with(lora({"q_proj"})), ModelHead::SequenceReward);
  EXPECT_TRUE(value.params().at("score.weight").trainable);
  EXPECT_FALSE(value.params().at("model.norm.weight").trainable);
}

TEST(LoraModel, InitIsPeftsKaimingUniformPerExpertAndZeroB) {
  const ModelConfig c = test::tiny_moe_config(false);
  auto model = make_lora_model(&c, nullptr, lora(kLanguageModules));
  auto again = make_lora_model(&c, nullptr, lora(kLanguageModules));
  for (const Parameter* p : model->lora_params()) {
    const std::vector<float> v = weight_values(p->value);
    EXPECT_EQ(v, weight_values(again->params().at(p->name).value)) << p->name << ": not deterministic";
    if (p->name.ends_with(".lora_B.weight")) {
      EXPECT_TRUE(all_zero_tensor(p->value)) << p->name;
      continue;
    }
    // U(-1/sqrt(in), 1/sqrt(in)) with `in` the last dimension, per expert for [E, r, in].
    const double bound = 1.0 / std::sqrt(static_cast<double>(p->shape.back()));
    double largest = 0;
    for (float x : v) largest = std::max(largest, static_cast<double>(std::abs(x)));
    EXPECT_LE(largest, bound) << p->name;
    EXPECT_GT(largest, 0.75 * bound) << p->name;
  }
}

TEST(LoraModel, UnmatchedEntriesAndHalfOfTheFusedExpertsAreInputErrors) {
  const ModelConfig dense = test::tiny_dense_config(false);
  testing::expect_input_error([&] { TrainModel m(dense, options_with(lora({"q_proj", "qproj"}))); },
                              {"model.lora_config.lora_modules", "'qproj'", "q_proj", "o_proj"});
  // No dense model has vision modules.
  testing::expect_input_error([&] { TrainModel m(dense, options_with(lora({"attn.qkv"}))); },
                              {"model.lora_config.lora_modules", "'attn.qkv'"});
  const ModelConfig moe = test::tiny_moe_config(false);
  testing::expect_input_error([&] { TrainModel m(moe, options_with(lora({"gate_proj", "down_proj"}))); },
                              {"gate_proj", "up_proj", "model.layers.0.mlp.experts.gate_up_proj"});
}

// The base comes from an HF directory (which has no adapters); the adapters start as init_weights starts them.
TEST(LoraModel, StartWeightsLoadTheBaseAndInitialiseTheAdapters) {
  const std::string dir = std::string(VEOMNI_FIXTURES_DIR) + "/hf/qwen3_toy/model";
  const ModelConfig c = load_model_config(dir);
  const LoraConfig config = lora({"q_proj", "down_proj"});
  TrainModel loaded(c, options_with(config));
  loaded.params().materialize_all(Device::cpu(), DType::F32);
  load_start_weights(loaded, dir, 5);
  TrainModel initialised(c, options_with(config));
  initialised.params().materialize_all(Device::cpu(), DType::F32);
  initialised.init_weights(5);
  const HfCheckpointReader source(dir);
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  EXPECT_EQ(weight_values(loaded.params().at(q).value), weight_values(source.read(q)));
  ASSERT_FALSE(loaded.lora_params().empty());
  for (const Parameter* p : loaded.lora_params()) {
    EXPECT_EQ(weight_values(p->value), weight_values(initialised.params().at(p->name).value)) << p->name;
    EXPECT_EQ(all_zero_tensor(p->value), p->name.ends_with(".lora_B.weight")) << p->name;
  }
  // A reward model started from the causal LM: its new head and the adapters start from the seed.
  TrainModel reward(c, options_with(config), ModelHead::SequenceReward);
  reward.params().materialize_all(Device::cpu(), DType::F32);
  EXPECT_NO_THROW(load_start_weights(reward, dir, 5));
  EXPECT_EQ(weight_values(reward.params().at(q).value), weight_values(source.read(q)));
}

}  // namespace
}  // namespace veomni
