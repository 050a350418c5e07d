// Unit tests of the Qwen3-Omni audio encoder: config, layout, names, gradients, windows, bad input, HF fixture.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "data/audio_length.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/audio/audio_conv_stem.h"
#include "model/audio/audio_encoder.h"
#include "model/audio/audio_encoder_config.h"
#include "model/audio/audio_layout.h"
#include "model/hf_loader.h"
#include "model/weight_source.h"
#include "tests/common/expect_error.h"
#include "tests/common/hf_fixture.h"
#include "tests/common/scratch_dir.h"

using namespace veomni;

namespace {

const std::string kToyConfig = std::string(VEOMNI_SOURCE_DIR) + "/configs/model_configs/qwen3_omni_moe_toy/config.json";

// Small enough for many forwards: 4 conv channels, d_model 16, windows of 2 chunks (26 tokens).
AudioEncoderConfig tiny_audio_config() {
  AudioEncoderConfig c;
  c.num_mel_bins = 128;
  c.d_model = 16;
  c.encoder_layers = 2;
  c.encoder_attention_heads = 2;
  c.encoder_ffn_dim = 24;
  c.downsample_hidden_size = 4;
  c.output_dim = 12;
  c.n_window = 50;
  c.n_window_infer = 200;
  return c;
}

Tensor random_audio_tensor(const Shape& shape, uint64_t seed, double scale, double offset = 0.0) {
  Rng rng(seed);
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double u1 = rng.uniform() + 1e-12, u2 = rng.uniform();
    p[i] = static_cast<float>(offset + scale * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2));
  }
  return t;
}

// Random values everywhere (biases and LayerNorm parameters too), so that every gradient path is exercised.
void randomize_encoder(AudioEncoder& encoder, uint64_t seed) {
  uint64_t k = seed;
  for (Parameter* p : encoder.parameters()) {
    const bool bias = p->name.size() > 5 && p->name.compare(p->name.size() - 5, 5, ".bias") == 0;
    const bool norm = p->name.find("layer_norm") != std::string::npos || p->name.find("ln_post") != std::string::npos;
    const double fan_in = p->shape.size() > 1 ? static_cast<double>(shape_numel(p->shape) / p->shape[0]) : 1.0;
    const double scale = bias ? 0.1 : norm ? 0.1 : 1.0 / std::sqrt(fan_in);
    p->value.copy_from(random_audio_tensor(p->shape, ++k, scale, norm && !bias ? 1.0 : 0.0));
  }
}

Tensor random_features(int64_t frames, uint64_t seed) { return random_audio_tensor({frames, 128}, seed, 1.0); }

// sum(out * weights) in f64.
double weighted_sum(const Tensor& out, const Tensor& weights) {
  const std::vector<float> a = out.to_float_vector(), b = weights.to_float_vector();
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

double max_abs_diff(const Tensor& a, const Tensor& b, int64_t row_begin, int64_t row_end) {
  const std::vector<float> x = a.slice(row_begin, row_end).to_float_vector();
  const std::vector<float> y = b.slice(row_begin, row_end).to_float_vector();
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::fabs(static_cast<double>(x[i]) - y[i]));
  return d;
}

class RecordingHooks : public ParamHooks {
 public:
  void before_forward(ParamGroup& g) override { events.push_back("F+" + g.name); }
  void after_forward(ParamGroup& g) override { events.push_back("F-" + g.name); }
  void before_backward(ParamGroup& g) override { events.push_back("B+" + g.name); }
  void after_backward(ParamGroup& g) override { events.push_back("B-" + g.name); }
  std::vector<std::string> events;
};

}  // namespace

// ---------------------------------------------------------------- config

TEST(AudioEncoderConfig, ReadsTheToyOmniConfig) {
  const AudioEncoderConfig c = load_audio_encoder_config(kToyConfig);
  EXPECT_EQ(c.param_prefix, "thinker.audio_tower.");
  EXPECT_EQ(c.num_mel_bins, 128);
  EXPECT_EQ(c.d_model, 32);
  EXPECT_EQ(c.encoder_layers, 2);
  EXPECT_EQ(c.encoder_attention_heads, 2);
  EXPECT_EQ(c.encoder_ffn_dim, 64);
  EXPECT_EQ(c.downsample_hidden_size, 8);
  EXPECT_EQ(c.n_window, 50);
  EXPECT_EQ(c.n_window_infer, 800);
  EXPECT_EQ(c.chunks_per_window(), 8);
  EXPECT_EQ(c.conv_freq_bins(), 16);
  EXPECT_EQ(c.conv_out_features(), 8 * 16);
  EXPECT_EQ(c.activation_function, "gelu");
  // output_dim feeds the thinker's text hidden size.
  const nlohmann::json root = read_json_file(kToyConfig);
  EXPECT_EQ(c.output_dim, root["thinker_config"]["text_config"]["hidden_size"].get<int64_t>());
}

TEST(AudioEncoderConfig, ReadsADirectoryAndDefaults) {
  const AudioEncoderConfig c =
      load_audio_encoder_config(std::string(VEOMNI_SOURCE_DIR) + "/configs/model_configs/qwen3_omni_moe_toy");
  EXPECT_EQ(c.d_model, 32);
  const AudioEncoderConfig d = audio_encoder_config_from_json(nlohmann::json::object(), "defaults");
  EXPECT_EQ(d.d_model, 1280);
  EXPECT_EQ(d.encoder_layers, 32);
  EXPECT_EQ(d.encoder_attention_heads, 20);
  EXPECT_EQ(d.encoder_ffn_dim, 5120);
  EXPECT_EQ(d.downsample_hidden_size, 480);
  EXPECT_EQ(d.output_dim, 3584);
  EXPECT_EQ(d.conv_out_features(), 480 * 16);
  EXPECT_EQ(d.chunks_per_window(), 8);
}

class AudioEncoderConfigFiles : public veomni::testing::ScratchDir {};

TEST_F(AudioEncoderConfigFiles, PrefixFollowsTheModelType) {
  const std::string dir = dir_.string();
  const nlohmann::json audio = {{"d_model", 16}, {"encoder_attention_heads", 2}};
  const nlohmann::json thinker = {{"model_type", "qwen3_omni_moe_thinker"}, {"audio_config", audio}};
  write_json_file(dir + "/thinker.json", thinker);
  nlohmann::json bare = audio;
  bare["model_type"] = "qwen3_omni_moe_audio_encoder";
  write_json_file(dir + "/bare.json", bare);
  write_json_file(dir + "/text.json", nlohmann::json{{"model_type", "qwen3_moe"}});
  EXPECT_EQ(load_audio_encoder_config(dir + "/thinker.json").param_prefix, "audio_tower.");
  EXPECT_EQ(load_audio_encoder_config(dir + "/bare.json").param_prefix, "");
  EXPECT_EQ(load_audio_encoder_config(dir + "/bare.json").d_model, 16);
  EXPECT_THROW(load_audio_encoder_config(dir + "/text.json"), InputError);
  EXPECT_THROW(load_audio_encoder_config(dir + "/absent.json"), InputError);
}

TEST(AudioEncoderConfig, RejectsWhatItCannotRun) {
  auto parse = [](nlohmann::json j) { return audio_encoder_config_from_json(j, "test.json"); };
  EXPECT_THROW(parse({{"n_window", 25}}), InputError);
  EXPECT_THROW(parse({{"n_window_infer", 50}}), InputError);
  EXPECT_THROW(parse({{"activation_function", "relu"}}), InputError);
  EXPECT_THROW(parse({{"d_model", 30}, {"encoder_attention_heads", 4}}), InputError);
  EXPECT_THROW(parse({{"d_model", "big"}}), InputError);
  EXPECT_THROW(parse({{"encoder_layers", 0}}), InputError);
  try {
    parse({{"n_window", 25}});
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("test.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("n_window"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse({{"activation_function", "gelu_pytorch_tanh"}}).tanh_gelu(), true);
}

// ---------------------------------------------------------------- layout

TEST(AudioLayout, TokensPerClipFollowTheLengthFormula) {
  const AudioLayout layout = audio_layout({100, 250, 800}, tiny_audio_config());
  EXPECT_EQ(layout.clip_tokens, (std::vector<int64_t>{13, 33, 104}));
  EXPECT_EQ(layout.chunk_frames, (std::vector<int64_t>{100, 100, 100, 50, 100, 100, 100, 100, 100, 100, 100, 100}));
  EXPECT_EQ(layout.chunk_first_frame[3], 300);
  EXPECT_EQ(layout.chunk_first_frame[4], 350);
  EXPECT_EQ(layout.padded_frames, 100);
  EXPECT_EQ(layout.padded_tokens, 13);
  EXPECT_EQ(layout.num_tokens(), 150);
  for (int64_t frames = 1; frames <= 1234; ++frames)
    ASSERT_EQ(audio_layout({frames}, tiny_audio_config()).clip_tokens[0], audio_output_length(frames)) << frames;
}

TEST(AudioLayout, TokensSkipThePaddingOfShortChunks) {
  const AudioLayout layout = audio_layout({30, 60}, tiny_audio_config());
  EXPECT_EQ(layout.padded_frames, 60);  // the longest chunk of the batch, not 100
  EXPECT_EQ(layout.padded_tokens, 8);
  EXPECT_EQ(layout.token_rows, (std::vector<int64_t>{0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15}));
  // The window is the batch's longest chunk in tokens times n_window_infer / 100 chunks: 8 * 2.
  EXPECT_EQ(layout.cu_seqlens, (std::vector<int32_t>{0, 4, 12}));
}

TEST(AudioLayout, WindowsSplitEveryClipLikeTransformers) {
  // tiny_audio_config: windows of 13 * 2 = 26 tokens; 300 frames -> 39 tokens -> 26 + 13; 230 -> 13 + 13 + 4 = 30.
  const AudioLayout layout = audio_layout({300, 230, 10}, tiny_audio_config());
  EXPECT_EQ(layout.clip_tokens, (std::vector<int64_t>{39, 30, 2}));
  EXPECT_EQ(layout.cu_seqlens, (std::vector<int32_t>{0, 26, 39, 65, 69, 71}));
  AudioEncoderConfig real = tiny_audio_config();
  real.n_window_infer = 800;  // the released models: 104-token windows
  EXPECT_EQ(audio_layout({1000, 230}, real).cu_seqlens, (std::vector<int32_t>{0, 104, 130, 160}));
}

TEST(AudioLayout, RejectsEmptyAndNegativeClips) {
  EXPECT_THROW(audio_layout({100, 0}, tiny_audio_config()), InputError);
  EXPECT_THROW(audio_layout({-5}, tiny_audio_config()), InputError);
  const AudioLayout none = audio_layout({}, tiny_audio_config());
  EXPECT_EQ(none.num_tokens(), 0);
  EXPECT_EQ(none.cu_seqlens, (std::vector<int32_t>{0}));
}

TEST(AudioLayout, PaddedChunksTransposeFramesIntoMelRows) {
  Tensor features = Tensor::empty({130, 128}, DType::F32);
  for (int64_t i = 0; i < features.numel(); ++i) features.data<float>()[i] = static_cast<float>(i);
  const AudioLayout layout = audio_layout({130}, tiny_audio_config());
  const Tensor chunks = audio_padded_chunks(features, layout);
  ASSERT_EQ(chunks.shape(), (Shape{2, 1, 128, 100}));
  auto at = [&](int64_t c, int64_t m, int64_t t) { return chunks.data<float>()[(c * 128 + m) * 100 + t]; };
  EXPECT_EQ(at(0, 5, 7), static_cast<float>(7 * 128 + 5));
  EXPECT_EQ(at(1, 127, 29), static_cast<float>((100 + 29) * 128 + 127));
  EXPECT_EQ(at(1, 3, 30), 0.0f);  // padding
}

TEST(AudioLayout, SinusoidTableIsTransformers) {
  const Tensor table = audio_sinusoid_table(13, 32);
  for (int64_t t = 0; t < 13; ++t) {
    for (int64_t k = 0; k < 16; ++k) {
      const double angle = static_cast<double>(t) * std::exp(-static_cast<double>(k) * std::log(10000.0) / 15.0);
      EXPECT_NEAR(table.data<float>()[t * 32 + k], std::sin(angle), 2e-6) << t << "," << k;
      EXPECT_NEAR(table.data<float>()[t * 32 + 16 + k], std::cos(angle), 2e-6) << t << "," << k;
    }
  }
  EXPECT_EQ(table.data<float>()[0], 0.0f);
  EXPECT_EQ(table.data<float>()[16], 1.0f);
}

// ---------------------------------------------------------------- convolution stem

namespace {

// Direct Conv2d(3x3, stride 2, padding 1) + erf GELU on one [C, H, W] image (naive loops, f64 accumulation).
std::vector<double> direct_conv_gelu(const std::vector<double>& x, int64_t c, int64_t h, int64_t w,
                                     const Tensor& weight, const Tensor& bias, int64_t& ho, int64_t& wo) {
  const int64_t out = weight.dim(0);
  ho = (h - 1) / 2 + 1;
  wo = (w - 1) / 2 + 1;
  std::vector<double> y(static_cast<size_t>(out * ho * wo));
  const float* wp = weight.data<float>();
  for (int64_t o = 0; o < out; ++o)
    for (int64_t oy = 0; oy < ho; ++oy)
      for (int64_t ox = 0; ox < wo; ++ox) {
        double acc = bias.data<float>()[o];
        for (int64_t ci = 0; ci < c; ++ci)
          for (int64_t ky = 0; ky < 3; ++ky)
            for (int64_t kx = 0; kx < 3; ++kx) {
              const int64_t iy = 2 * oy - 1 + ky, ix = 2 * ox - 1 + kx;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              acc += wp[((o * c + ci) * 3 + ky) * 3 + kx] * x[static_cast<size_t>((ci * h + iy) * w + ix)];
            }
        y[static_cast<size_t>((o * ho + oy) * wo + ox)] = 0.5 * acc * (1 + std::erf(acc / std::sqrt(2.0)));
      }
  return y;
}

}  // namespace

// The im2col + per-chunk GEMM stem against direct convolutions on transformers' [chunk, 1, mel, time] input, with
// conv_out reading (channel, mel bin) features per time step.
TEST(AudioConvStem, MatchesDirectConvolutions) {
  AudioEncoderConfig config = tiny_audio_config();
  config.num_mel_bins = 20;  // bins 20 -> 10 -> 5 -> 3
  ParamStore store;
  AudioEncoder encoder(store, config);
  randomize_encoder(encoder, 21);
  const std::string a = config.param_prefix;
  std::array<Parameter*, 3> weights{}, biases{};
  for (size_t i = 0; i < 3; ++i) {
    weights[i] = &store.at(a + "conv2d" + std::to_string(i + 1) + ".weight");
    biases[i] = &store.at(a + "conv2d" + std::to_string(i + 1) + ".bias");
  }
  Parameter& conv_out = store.at(a + "conv_out.weight");
  AudioConvStem stem(weights, biases, &conv_out);
  const int64_t chunks = 2, mel = 20, frames = 13;
  const Tensor input = random_audio_tensor({chunks, 1, mel, frames}, 22, 1.0);
  const Tensor out = stem.forward(input, false).out;
  const int64_t steps = 2;  // 13 -> 7 -> 4 -> 2
  ASSERT_EQ(out.shape(), (Shape{chunks * steps, 16}));
  for (int64_t b = 0; b < chunks; ++b) {
    std::vector<double> x(static_cast<size_t>(mel * frames));
    for (size_t i = 0; i < x.size(); ++i) x[i] = input.data<float>()[static_cast<size_t>(b * mel * frames) + i];
    int64_t c = 1, h = mel, w = frames;
    for (size_t i = 0; i < 3; ++i) {
      int64_t ho = 0, wo = 0;
      x = direct_conv_gelu(x, c, h, w, weights[i]->value, biases[i]->value, ho, wo);
      c = weights[i]->value.dim(0), h = ho, w = wo;
    }
    ASSERT_EQ(w, steps);
    for (int64_t t = 0; t < steps; ++t)
      for (int64_t d = 0; d < 16; ++d) {
        double acc = 0;
        for (int64_t ci = 0; ci < c; ++ci)
          for (int64_t f = 0; f < h; ++f)
            acc += conv_out.value.data<float>()[d * c * h + ci * h + f] * x[static_cast<size_t>((ci * h + f) * w + t)];
        EXPECT_NEAR(out.data<float>()[(b * steps + t) * 16 + d], acc, 1e-5 * (1 + std::fabs(acc))) << b << "," << t;
      }
  }
}

// ---------------------------------------------------------------- encoder

TEST(AudioEncoder, ParameterNamesAndGroupsFollowTransformers) {
  ParamStore store;
  AudioEncoder encoder(store, load_audio_encoder_config(kToyConfig));
  std::vector<std::string> names;
  std::map<std::string, Shape> shapes;
  for (const Parameter* p : encoder.parameters()) {
    names.push_back(p->name);
    shapes[p->name] = p->shape;
  }
  const std::string a = "thinker.audio_tower.";
  std::vector<std::string> expected = {a + "conv2d1.weight", a + "conv2d1.bias", a + "conv2d2.weight",
                                       a + "conv2d2.bias",   a + "conv2d3.weight", a + "conv2d3.bias",
                                       a + "conv_out.weight"};
  for (int i = 0; i < 2; ++i) {
    const std::string l = a + "layers." + std::to_string(i) + ".";
    for (const char* m : {"self_attn.k_proj", "self_attn.v_proj", "self_attn.q_proj", "self_attn.out_proj",
                          "self_attn_layer_norm", "fc1", "fc2", "final_layer_norm"}) {
      expected.push_back(l + m + ".weight");
      expected.push_back(l + m + ".bias");
    }
  }
  for (const char* m : {"ln_post", "proj1", "proj2"}) {
    expected.push_back(a + m + ".weight");
    expected.push_back(a + m + ".bias");
  }
  EXPECT_EQ(names, expected);
  EXPECT_EQ(shapes[a + "conv2d1.weight"], (Shape{8, 1, 3, 3}));
  EXPECT_EQ(shapes[a + "conv2d2.weight"], (Shape{8, 8, 3, 3}));
  EXPECT_EQ(shapes[a + "conv_out.weight"], (Shape{32, 128}));
  EXPECT_EQ(shapes[a + "layers.1.fc1.weight"], (Shape{64, 32}));
  EXPECT_EQ(shapes[a + "layers.1.fc2.weight"], (Shape{32, 64}));
  EXPECT_EQ(shapes[a + "proj2.weight"], (Shape{64, 32}));
  EXPECT_EQ(shapes[a + "proj2.bias"], (Shape{64}));
  EXPECT_EQ(encoder.group_names(), (std::vector<std::string>{"audio.conv", "audio.layers.0", "audio.layers.1",
                                                             "audio.head"}));
  for (const Parameter* p : encoder.parameters()) EXPECT_EQ(p->value.shape(), p->shape) << p->name;
}

TEST(AudioEncoder, SharesAStoreWithOtherTowers) {
  ParamStore store;
  store.begin_group("embed");
  Parameter* other = store.add("thinker.model.embed_tokens.weight", {4, 4});
  AudioEncoder encoder(store, tiny_audio_config());
  EXPECT_FALSE(other->value.defined());  // the encoder materialises only its own parameters
  EXPECT_EQ(store.groups().size(), 5u);
  EXPECT_EQ(encoder.group_names().front(), "audio.conv");
  EXPECT_EQ(encoder.group_names().back(), "audio.head");
  EXPECT_EQ(static_cast<int64_t>(encoder.parameters().size()) + 1, static_cast<int64_t>(store.all().size()));
}

TEST(AudioEncoder, InitFollowsTransformers) {
  ParamStore store;
  AudioEncoder encoder(store, tiny_audio_config());
  encoder.init_weights(3);
  for (const Parameter* p : encoder.parameters()) {
    const std::vector<float> v = p->value.to_float_vector();
    double sum = 0, sq = 0;
    for (float x : v) sum += x, sq += static_cast<double>(x) * x;
    const bool bias = p->name.find(".bias") != std::string::npos;
    const bool norm = p->name.find("layer_norm") != std::string::npos || p->name.find("ln_post") != std::string::npos;
    if (bias) {
      EXPECT_EQ(sq, 0.0) << p->name;
    } else if (norm) {
      EXPECT_EQ(sum, static_cast<double>(v.size())) << p->name;
    } else {
      const double std = std::sqrt(sq / static_cast<double>(v.size()));
      EXPECT_GT(std, 0.01) << p->name;
      EXPECT_LT(std, 0.03) << p->name;
    }
  }
}

TEST(AudioEncoder, OutputRowsPerClipFollowTheLengthFormula) {
  ParamStore store;
  AudioEncoder encoder(store, tiny_audio_config());
  randomize_encoder(encoder, 1);
  const AudioEncoder::Output result = encoder.forward(random_features(100 + 250 + 800, 2), {100, 250, 800});
  const Tensor& out = result.out;
  EXPECT_EQ(out.shape(), (Shape{13 + 33 + 104, 12}));
  EXPECT_EQ(result.saved.layout.clip_tokens, (std::vector<int64_t>{audio_output_length(100), audio_output_length(250),
                                                                     audio_output_length(800)}));
  for (float x : out.to_float_vector()) ASSERT_TRUE(std::isfinite(x));
}

// Central differences of sum(out * w) in f32 against the analytic gradient, for the largest and two random
// entries of every parameter (input features need no gradient). Tolerance: 1e-4 + 2e-3 |fd| (f32 rounding of a
// loss of order 1 over a step of 6e-3 is about 2e-5; GELU, LayerNorm and softmax are smooth, so no entry may be
// skipped).
TEST(AudioEncoder, GradientsMatchFiniteDifferences) {
  ParamStore store;
  AudioEncoder encoder(store, tiny_audio_config());
  randomize_encoder(encoder, 7);
  const std::vector<int64_t> lengths = {230, 40};  // chunks 100, 100, 30 (padded), 40; two windows in clip 0
  const Tensor features = random_features(270, 8);
  const AudioLayout layout = audio_layout(lengths, tiny_audio_config());
  ASSERT_EQ(layout.cu_seqlens, (std::vector<int32_t>{0, 26, 30, 35}));
  const Tensor weights = random_audio_tensor({35, 12}, 9, 1.0 / std::sqrt(35.0 * 12.0));

  store.zero_grads();
  encoder.backward(std::move(encoder.forward(features, lengths).saved), weights);
  auto objective = [&] { return weighted_sum(encoder.forward(features, lengths, false).out, weights); };

  const double h = 3e-3;
  Rng rng(5);
  int probes = 0;
  for (Parameter* p : encoder.parameters()) {
    const std::vector<float> grad = p->grad.to_float_vector();
    size_t largest = 0;
    for (size_t i = 0; i < grad.size(); ++i)
      if (std::fabs(grad[i]) > std::fabs(grad[largest])) largest = i;
    if (p->name.find("self_attn.k_proj.bias") != std::string::npos) {
      // q.(k + b) shifts every score of a query by the same q.b, which softmax ignores: the gradient is zero.
      EXPECT_LT(std::fabs(grad[largest]), 1e-6) << p->name;
    } else {
      EXPECT_GT(std::fabs(grad[largest]), 1e-4) << p->name << " has a vanishing gradient: the check proves nothing";
    }
    for (size_t i : {largest, static_cast<size_t>(rng.uniform_int(grad.size())),
                     static_cast<size_t>(rng.uniform_int(grad.size()))}) {
      float* v = p->value.data<float>() + i;
      const float original = *v;
      *v = static_cast<float>(original + h);
      const double plus = objective();
      *v = static_cast<float>(original - h);
      const double minus = objective();
      *v = original;
      const double fd = (plus - minus) / (2 * h);
      EXPECT_NEAR(grad[i], fd, 1e-4 + 2e-3 * std::fabs(fd)) << p->name << "[" << i << "]";
      ++probes;
    }
  }
  EXPECT_EQ(probes, 3 * static_cast<int>(encoder.parameters().size()));
}

TEST(AudioEncoder, AttentionStaysInsideItsWindow) {
  ParamStore store;
  AudioEncoder encoder(store, tiny_audio_config());
  randomize_encoder(encoder, 11);
  // 300 frames: windows of 26 tokens (chunks 0-1) and 13 tokens (chunk 2); a second clip of 120 frames.
  const std::vector<int64_t> lengths = {300, 120};
  Tensor features = random_features(420, 12);
  const Tensor before = encoder.forward(features, lengths, false).out;
  ASSERT_EQ(before.dim(0), 39 + 16);
  features.data<float>()[250 * 128 + 17] += 3.0f;  // a frame of chunk 2: window 2 of clip 0
  const Tensor after = encoder.forward(features, lengths, false).out;
  EXPECT_EQ(max_abs_diff(before, after, 0, 26), 0.0) << "window 1 saw a frame of window 2";
  EXPECT_GT(max_abs_diff(before, after, 26, 39), 1e-4) << "window 2 ignored its own frame";
  EXPECT_EQ(max_abs_diff(before, after, 39, 55), 0.0) << "the other clip saw the change";
  features.data<float>()[150 * 128 + 3] -= 2.0f;  // chunk 1: the first window changes as a whole
  const Tensor again = encoder.forward(features, lengths, false).out;
  EXPECT_GT(max_abs_diff(after, again, 0, 13), 1e-4) << "attention did not mix chunks 0 and 1 of one window";
}

TEST(AudioEncoder, BatchedClipsEqualSeparateOnesWhenThePaddingAgrees) {
  ParamStore store;
  AudioEncoder encoder(store, tiny_audio_config());
  randomize_encoder(encoder, 13);
  const Tensor a = random_features(150, 14), b = random_features(200, 15);
  Tensor both = Tensor::empty({350, 128}, DType::F32);
  both.slice(0, 150).copy_from(a);
  both.slice(150, 350).copy_from(b);
  const Tensor together = encoder.forward(both, {150, 200}, false).out;
  const Tensor alone_a = encoder.forward(a, {150}, false).out;
  const Tensor alone_b = encoder.forward(b, {200}, false).out;
  ASSERT_EQ(together.dim(0), alone_a.dim(0) + alone_b.dim(0));
  EXPECT_LT(max_abs_diff(together.slice(0, alone_a.dim(0)), alone_a, 0, alone_a.dim(0)), 1e-5);
  EXPECT_LT(max_abs_diff(together.slice(alone_a.dim(0), together.dim(0)), alone_b, 0, alone_b.dim(0)), 1e-5);
  // A 30-frame clip alone is padded to 30 frames, next to a 100-frame clip to 100: transformers' zero padding
  // reaches its last tokens through the convolutions' bias and GELU, so the two differ (and we follow transformers).
  const Tensor c = random_features(30, 16);
  Tensor c_then_b = Tensor::empty({230, 128}, DType::F32);
  c_then_b.slice(0, 30).copy_from(c);
  c_then_b.slice(30, 230).copy_from(b);
  const Tensor c_alone = encoder.forward(c, {30}, false).out;
  const Tensor c_batched = encoder.forward(c_then_b, {30, 200}, false).out.slice(0, c_alone.dim(0));
  EXPECT_GT(max_abs_diff(c_alone, c_batched, 0, c_alone.dim(0)), 1e-4);
}

TEST(AudioEncoder, RejectsBadInput) {
  ParamStore store;
  AudioEncoder encoder(store, tiny_audio_config());
  EXPECT_THROW(encoder.forward(random_features(100, 1), {100, 0}), InputError);
  EXPECT_THROW(encoder.forward(random_features(100, 1), {60}), InputError);
  EXPECT_THROW(encoder.forward(random_features(100, 1), {-100, 200}), InputError);
  EXPECT_THROW(encoder.forward(Tensor::zeros({100, 80}, DType::F32), {100}), InputError);
  EXPECT_THROW(encoder.forward(Tensor::zeros({100}, DType::F32), {100}), InputError);
  EXPECT_THROW(encoder.forward(Tensor::zeros({100, 128}, DType::I64), {100}), InputError);
  AudioEncoder::Output unsaved = encoder.forward(random_features(100, 1), {100}, false);
  // nothing saved
  EXPECT_THROW(encoder.backward(std::move(unsaved.saved), Tensor::zeros({13, 12}, DType::F32)), Error);
  AudioEncoder::Output saved = encoder.forward(random_features(100, 1), {100});
  EXPECT_THROW(encoder.backward(std::move(saved.saved), Tensor::zeros({12, 12}, DType::F32)), InputError);
}

TEST(AudioEncoder, BackwardWithoutSavedForwardIsAnInternalError) {
  ParamStore store;
  AudioEncoder encoder(store, tiny_audio_config());
  randomize_encoder(encoder, 3);
  const std::vector<std::string> message{"audio encoder backward without the saved values"};
  AudioEncoder::Output unsaved = encoder.forward(random_features(100, 1), {100}, false);
  EXPECT_FALSE(unsaved.saved.kept);
  EXPECT_EQ(unsaved.saved.layout.num_tokens(), 0);
  veomni::testing::expect_internal_error([&] { encoder.backward(std::move(unsaved.saved), unsaved.out); }, message);
  veomni::testing::expect_internal_error([&] { encoder.backward({}, Tensor::zeros({0, 12}, DType::F32)); }, message);
  AudioEncoder::Output no_clips = encoder.forward(Tensor::zeros({0, 128}, DType::F32), {}, false);
  veomni::testing::expect_internal_error([&] { encoder.backward(std::move(no_clips.saved), no_clips.out); }, message);
  // backward consumes its Saved: nothing of the forward is left, and a second backward of it is refused.
  AudioEncoder::Output out = encoder.forward(random_features(100, 1), {100});
  EXPECT_EQ(out.saved.layout.num_tokens(), 13);
  encoder.backward(std::move(out.saved), out.out);
  EXPECT_FALSE(out.saved.kept);
  EXPECT_TRUE(out.saved.layers.empty() && out.saved.layout.token_rows.empty());
  EXPECT_FALSE(out.saved.token_ids.defined() || out.saved.proj1_out.defined());
  veomni::testing::expect_internal_error([&] { encoder.backward(std::move(out.saved), out.out); }, message);
}

// Two forwards, then their backwards in reverse order: each backward gives exactly the gradients of its own
// forward/backward pair, so the encoder keeps no state of a forward (its layout included) outside the Saved value
// it returned. (Compared one backward at a time, from zero gradients: summed, the two orders differ in rounding.)
TEST(AudioEncoder, InterleavedForwardsAndReversedBackwardsMatchSeparatePairs) {
  ParamStore store;
  AudioEncoder encoder(store, tiny_audio_config());
  randomize_encoder(encoder, 5);
  const std::vector<int64_t> lengths_a = {230, 40}, lengths_b = {120};
  const Tensor features_a = random_features(270, 8), features_b = random_features(120, 9);
  const Tensor weights_a = random_audio_tensor({35, 12}, 10, 0.1), weights_b = random_audio_tensor({16, 12}, 11, 0.1);
  auto grads = [&] {
    std::map<std::string, std::vector<float>> g;
    for (Parameter* p : encoder.parameters()) g[p->name] = p->grad.to_float_vector();
    return g;
  };
  auto pair = [&](const Tensor& features, const std::vector<int64_t>& lengths, const Tensor& weights) {
    store.zero_grads();
    encoder.backward(std::move(encoder.forward(features, lengths).saved), weights);
    return grads();
  };
  const auto grads_a = pair(features_a, lengths_a, weights_a), grads_b = pair(features_b, lengths_b, weights_b);
  ASSERT_NE(grads_a, grads_b);

  AudioEncoder::Output out_a = encoder.forward(features_a, lengths_a);
  AudioEncoder::Output out_b = encoder.forward(features_b, lengths_b);
  store.zero_grads();
  encoder.backward(std::move(out_b.saved), weights_b);
  EXPECT_EQ(grads(), grads_b);
  store.zero_grads();
  encoder.backward(std::move(out_a.saved), weights_a);
  EXPECT_EQ(grads(), grads_a);
}

TEST(AudioEncoder, NoClipsStillPassesEveryGroup) {
  ParamStore store;
  AudioEncoder encoder(store, tiny_audio_config());
  RecordingHooks hooks;
  encoder.set_param_hooks(&hooks);
  AudioEncoder::Output out = encoder.forward(Tensor::zeros({0, 128}, DType::F32), {});
  EXPECT_EQ(out.out.shape(), (Shape{0, 12}));
  encoder.backward(std::move(out.saved), Tensor::zeros({0, 12}, DType::F32));
  const std::vector<std::string> expected = {
      "F+audio.conv", "F-audio.conv", "F+audio.layers.0", "F-audio.layers.0", "F+audio.layers.1", "F-audio.layers.1",
      "F+audio.head", "F-audio.head", "B+audio.head", "B-audio.head", "B+audio.layers.1", "B-audio.layers.1",
      "B+audio.layers.0", "B-audio.layers.0", "B+audio.conv", "B-audio.conv"};
  EXPECT_EQ(hooks.events, expected);
  hooks.events.clear();
  encoder.backward(std::move(encoder.forward(random_features(100, 3), {100}).saved),
                   Tensor::zeros({13, 12}, DType::F32));
  EXPECT_EQ(hooks.events, expected);  // the same order with work
}

// ---------------------------------------------------------------- transformers fixture

// tests/fixtures/audio_encoder/, written by scripts/gen_audio_encoder_fixtures.py with transformers 5.17 (CPU fp32).
// Disabled until that script has run on the GPU machine and its output is committed (issue "omni-modal training");
// run it meanwhile with --gtest_also_run_disabled_tests.
TEST(AudioEncoderHfFixture, ForwardAndBackwardMatchTransformers) {
  const std::string dir = std::string(VEOMNI_FIXTURES_DIR) + "/audio_encoder";
  for (const char* file : {"config.json", "weights.safetensors", "inputs.safetensors", "expected.safetensors",
                           "expected.json"})
    ASSERT_TRUE(std::filesystem::exists(dir + "/" + file))
        << "missing fixture tests/fixtures/audio_encoder/" << file
        << ": generate it with scripts/gen_audio_encoder_fixtures.py (transformers 5.17)";
  constexpr double kRelTol = 1e-4;
  const AudioEncoderConfig config = load_audio_encoder_config(dir + "/config.json");
  ParamStore store;
  AudioEncoder encoder(store, config);
  load_hf_weights(store, HfCheckpointSource(dir + "/weights.safetensors"));
  SafetensorsReader inputs(dir + "/inputs.safetensors");
  SafetensorsReader expected(dir + "/expected.safetensors");
  const nlohmann::json facts = read_json_file(dir + "/expected.json");

  const Tensor lengths_tensor = inputs.read("feature_lengths");
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < lengths_tensor.numel(); ++i)
    lengths.push_back(static_cast<int64_t>(lengths_tensor.item_as_double(i)));
  const Tensor weights = inputs.read("loss_weights");

  store.zero_grads();
  AudioEncoder::Output result = encoder.forward(inputs.read("input_features"), lengths);
  const Tensor out = result.out;
  EXPECT_EQ(result.saved.layout.clip_tokens, facts["tokens_per_clip"].get<std::vector<int64_t>>());
  EXPECT_EQ(result.saved.layout.cu_seqlens, facts["cu_seqlens"].get<std::vector<int32_t>>());
  const double out_err = veomni::testing::relative_error(out, expected.read("output"));
  EXPECT_LE(out_err, kRelTol) << "audio embeddings";
  const double loss = weighted_sum(out, weights), hf_loss = facts["loss"].get<double>();
  EXPECT_NEAR(loss, hf_loss, kRelTol * std::fabs(hf_loss) + 1e-6);

  encoder.backward(std::move(result.saved), weights);
  double worst = 0;
  std::string worst_name;
  for (const Parameter* p : encoder.parameters()) {
    const std::string key = "grad." + p->name;
    ASSERT_TRUE(expected.contains(key)) << "fixture has no gradient for " << p->name;
    double err = veomni::testing::relative_error(p->grad, expected.read(key));
    if (veomni::testing::gradient_is_zero_in_exact_arithmetic(p->name)) {
      const Tensor weight_grad = expected.read("grad." + veomni::testing::matching_weight_name(p->name));
      err = std::max(veomni::testing::noise_level(p->grad, weight_grad),
                     veomni::testing::noise_level(expected.read(key), weight_grad));
    }
    EXPECT_LE(err, kRelTol) << "gradient of " << p->name;
    if (err > worst) worst = err, worst_name = p->name;
  }
  std::printf("[audio_encoder] output rel err %.3g, loss %.9g vs %.9g, worst grad rel err %.3g (%s)\n", out_err, loss,
              hf_loss, worst, worst_name.c_str());
}
