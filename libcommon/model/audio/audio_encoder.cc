// Qwen3-Omni audio encoder: convolution stem, per-chunk sinusoids, windowed encoder layers and the output head.
#include "model/audio/audio_encoder.h"

#include <array>
#include <cstring>
#include <string>
#include <utility>

#include "kernels/ops.h"
#include "model/audio/audio_conv_stem.h"
#include "model/audio/audio_encoder_layer.h"
#include "model/init.h"
#include "model/layers/common.h"
#include "model/layers/biased_linear.h"
#include "model/layers/layer_norm.h"
#include "model/layers/lora_adapter.h"

namespace veomni {

namespace {

bool is_layer_norm(const std::string& name) {
  return name.find("layer_norm.") != std::string::npos || name.find("ln_post.") != std::string::npos;
}

// Rows of the sinusoid table for every token: a token's position is its time step inside its chunk.
Tensor token_positions(const AudioLayout& layout, int64_t channels) {
  const Tensor table = audio_sinusoid_table(layout.padded_tokens, channels);
  Tensor rows = Tensor::empty({layout.num_tokens(), channels}, DType::F32);
  for (int64_t n = 0; n < layout.num_tokens(); ++n) {
    const int64_t t = layout.token_rows[static_cast<size_t>(n)] % layout.padded_tokens;
    std::memcpy(rows.data<float>() + n * channels, table.data<float>() + t * channels,
                static_cast<size_t>(channels) * sizeof(float));
  }
  return rows;
}

void validate_input(const Tensor& features, const std::vector<int64_t>& lengths, const AudioEncoderConfig& config) {
  VEOMNI_INPUT_CHECK(features.ndim() == 2 && features.dim(1) == config.num_mel_bins,
                     "audio input_features must be [frames, {}] (num_mel_bins), got {}", config.num_mel_bins,
                     features.describe());
  VEOMNI_INPUT_CHECK(features.dtype() == DType::F32 || features.dtype() == DType::BF16 ||
                         features.dtype() == DType::F16,
                     "audio input_features must hold floats, got {}", features.describe());
  int64_t total = 0;
  for (int64_t length : lengths) total += length;
  VEOMNI_INPUT_CHECK(total == features.dim(0),
                     "audio_feature_lengths sum to {} frames but input_features has {} rows ({} clips)", total,
                     features.dim(0), lengths.size());
}

}  // namespace

struct AudioEncoder::Impl {
  AudioEncoderConfig config;
  AudioEncoderOptions options;
  ParamStore& store;
  std::vector<Parameter*> params;
  size_t first_group = 0;  // index in store.groups() of "audio.conv"; the layers and the head follow it
  std::unique_ptr<AudioConvStem> stem;
  std::vector<std::unique_ptr<AudioEncoderLayer>> layers;
  std::unique_ptr<LayerNorm> ln_post;
  std::unique_ptr<BiasedLinear> proj1, proj2;
  ops::GeluKind activation;

  Impl(ParamStore& s, const AudioEncoderConfig& c, const AudioEncoderOptions& o);
  Parameter* add(const std::string& name, const Shape& shape);
  ParamGroup& group(size_t offset) const { return store.groups()[first_group + offset]; }
  ParamGroup& head_group() const { return group(layers.size() + 1); }

  // forward's working state is the Saved it returns: state.layout and state.token_ids are needed saved or not.
  Tensor stem_forward(const Tensor& input_features, bool save, Saved& state) const;
  Tensor head_forward(const Tensor& h, bool save, Saved& state) const;
  Output forward(const Tensor& input_features, const std::vector<int64_t>& feature_lengths, bool save) const;
  void backward(Saved&& saved, const Tensor& d_out) const;
  void pass_groups_without_work() const;

  void before_forward(ParamGroup& g) const { if (options.param_hooks) options.param_hooks->before_forward(g); }
  void after_forward(ParamGroup& g) const { if (options.param_hooks) options.param_hooks->after_forward(g); }
  void before_backward(ParamGroup& g) const { if (options.param_hooks) options.param_hooks->before_backward(g); }
  void after_backward(ParamGroup& g) const { if (options.param_hooks) options.param_hooks->after_backward(g); }
};

Parameter* AudioEncoder::Impl::add(const std::string& name, const Shape& shape) {
  Parameter* p = store.add(config.param_prefix + name, shape);
  params.push_back(p);
  return p;
}

AudioEncoder::Impl::Impl(ParamStore& s, const AudioEncoderConfig& c, const AudioEncoderOptions& o)
    : config(c), options(o), store(s), activation(c.tanh_gelu() ? ops::GeluKind::Tanh : ops::GeluKind::Erf) {
  validate_audio_encoder_config(config, "audio encoder config");
  const int64_t channels = config.downsample_hidden_size, d = config.d_model;
  first_group = store.groups().size();
  store.begin_group("audio.conv");
  std::array<Parameter*, 3> conv_weights{}, conv_biases{};
  for (size_t i = 0; i < 3; ++i) {
    const std::string name = "conv2d" + std::to_string(i + 1);
    conv_weights[i] = add(name + ".weight", {channels, i == 0 ? 1 : channels, 3, 3});
    conv_biases[i] = add(name + ".bias", {channels});
  }
  Parameter* conv_out = add("conv_out.weight", {d, config.conv_out_features()});
  stem = std::make_unique<AudioConvStem>(conv_weights, conv_biases, conv_out);
  for (int64_t i = 0; i < config.encoder_layers; ++i) {
    store.begin_group("audio.layers." + std::to_string(i));
    const size_t before = store.all().size();
    layers.push_back(std::make_unique<AudioEncoderLayer>(store, config, i));
    for (size_t k = before; k < store.all().size(); ++k) params.push_back(store.all()[k].get());
  }
  store.begin_group("audio.head");
  Parameter* ln_weight = add("ln_post.weight", {d});
  ln_post = std::make_unique<LayerNorm>(ln_weight, add("ln_post.bias", {d}), config.layer_norm_eps);
  const size_t before_projections = store.all().size();  // the projections' LoRA adapters follow their weights
  proj1 = std::make_unique<BiasedLinear>(store, config.param_prefix + "proj1", d, d);
  proj2 = std::make_unique<BiasedLinear>(store, config.param_prefix + "proj2", config.output_dim, d);
  for (size_t k = before_projections; k < store.all().size(); ++k) params.push_back(store.all()[k].get());
  // Under FSDP the parameter hooks own the storage (shards and gathered copies).
  if (!options.param_hooks && options.materialize)
    for (Parameter* p : params) p->value = Tensor::zeros(p->local_shape(), options.compute_dtype, options.device);
}

// Chunks -> convolutions -> conv_out, then the tokens picked out of the padded grid plus their sinusoids.
Tensor AudioEncoder::Impl::stem_forward(const Tensor& input_features, bool save, Saved& state) const {
  const AudioLayout& layout = state.layout;
  const Tensor host_chunks = audio_padded_chunks(input_features, layout);
  const Tensor chunks = converted(host_chunks.to(options.device), options.compute_dtype);
  ParamGroup& conv = group(0);
  before_forward(conv);
  const Tensor grid = take_out(stem->forward(chunks, save), state.stem);
  after_forward(conv);
  state.token_ids = Tensor::from_vector(layout.token_rows, {layout.num_tokens()}).to(options.device);
  Tensor h = empty_like(grid, {layout.num_tokens(), config.d_model});
  ops::embedding_forward(state.token_ids, grid, h);
  ops::add_(h, converted(token_positions(layout, config.d_model).to(options.device), options.compute_dtype));
  return h;
}

Tensor AudioEncoder::Impl::head_forward(const Tensor& h, bool save, Saved& state) const {
  ParamGroup& head = head_group();
  before_forward(head);
  const Tensor p1 =
      take_out(proj1->forward(take_out(ln_post->forward(h, save), state.ln_post), save), state.proj1);
  Tensor act = empty_like(p1, p1.shape());
  ops::gelu_forward(p1, activation, act);
  Tensor out = take_out(proj2->forward(act, save), state.proj2);
  after_forward(head);
  if (save) state.proj1_out = p1;
  return out;
}

AudioEncoder::Output AudioEncoder::Impl::forward(const Tensor& input_features,
                                                 const std::vector<int64_t>& feature_lengths, bool save) const {
  validate_input(input_features, feature_lengths, config);
  Output result;
  Saved& state = result.saved;
  state.layout = audio_layout(feature_lengths, config);
  if (state.layout.num_tokens() == 0) {
    pass_groups_without_work();
    result.out = Tensor::empty({0, config.output_dim}, options.compute_dtype, options.device);
  } else {
    Tensor h = stem_forward(input_features, save, state);
    for (size_t i = 0; i < layers.size(); ++i) {
      before_forward(group(i + 1));
      h = take_out(layers[i]->forward(h, state.layout.cu_seqlens, save), state.layers.emplace_back());
      after_forward(group(i + 1));
    }
    result.out = head_forward(h, save, state);
  }
  if (save) {
    state.kept = true;
  } else {
    state = Saved{};  // forward's working state only: nothing to keep
  }
  return result;
}

// No audio on this rank: every group is still gathered and reduced so that collective calls line up.
void AudioEncoder::Impl::pass_groups_without_work() const {
  for (size_t i = 0; i < layers.size() + 2; ++i) {
    before_forward(group(i));
    after_forward(group(i));
  }
}

void AudioEncoder::Impl::backward(Saved&& saved, const Tensor& d_out) const {
  Saved state = std::exchange(saved, Saved{});  // dropped on return, whatever happens
  VEOMNI_CHECK(state.kept,
               "audio encoder backward without the saved values of a forward that kept them (save = true)");
  const AudioLayout& layout = state.layout;
  VEOMNI_INPUT_CHECK(d_out.ndim() == 2 && d_out.dim(0) == layout.num_tokens() && d_out.dim(1) == config.output_dim,
                     "audio encoder output gradient must be [{}, {}], got {}", layout.num_tokens(), config.output_dim,
                     d_out.describe());
  if (layout.num_tokens() == 0) {
    // Zero gradients, reduced like real ones, so that every rank's reduce-scatters line up.
    for (size_t i = layers.size() + 2; i-- > 0;) {
      before_backward(group(i));
      touch_grads(group(i));
      after_backward(group(i));
    }
    return;
  }
  VEOMNI_CHECK(state.layers.size() == layers.size(), "{} saved layers for {} layers", state.layers.size(),
               layers.size());
  const Tensor dy = converted(d_out.to(options.device), options.compute_dtype);
  ParamGroup& head = head_group();
  before_backward(head);
  const Tensor dact = proj2->backward(std::move(state.proj2), dy);
  Tensor dp1 = empty_like(dact, dact.shape());
  ops::gelu_backward(dact, state.proj1_out, activation, dp1);
  state.proj1_out = Tensor();
  Tensor dh = ln_post->backward(std::move(state.ln_post), proj1->backward(std::move(state.proj1), dp1));
  after_backward(head);
  for (size_t i = layers.size(); i-- > 0;) {
    before_backward(group(i + 1));
    dh = layers[i]->backward(std::move(state.layers[i]), dh, layout.cu_seqlens);
    after_backward(group(i + 1));
  }
  // The gather's adjoint scatters into the padded grid; padding rows get no gradient.
  Tensor dgrid = Tensor::zeros({layout.num_chunks() * layout.padded_tokens, config.d_model}, DType::F32,
                               options.device);
  ops::embedding_backward(state.token_ids, dh, dgrid);
  ParamGroup& conv = group(0);
  before_backward(conv);
  stem->backward(std::move(state.stem), converted(dgrid, options.compute_dtype));
  after_backward(conv);
}

AudioEncoder::AudioEncoder(ParamStore& store, const AudioEncoderConfig& config, const AudioEncoderOptions& options)
    : impl_(std::make_unique<Impl>(store, config, options)) {}

AudioEncoder::~AudioEncoder() = default;

const AudioEncoderConfig& AudioEncoder::config() const { return impl_->config; }

const std::vector<Parameter*>& AudioEncoder::parameters() const { return impl_->params; }

std::vector<std::string> AudioEncoder::group_names() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < impl_->layers.size() + 2; ++i) names.push_back(impl_->group(i).name);
  return names;
}

void AudioEncoder::set_param_hooks(ParamHooks* hooks) { impl_->options.param_hooks = hooks; }

void AudioEncoder::init_weights(uint64_t seed) {
  for (Parameter* p : impl_->params) {
    if (!p->takes_start_values()) continue;
    if (is_lora_param_name(p->name)) {
      init_parameter(*p, lora_init_spec(*p), seed);
    } else if (p->name.ends_with(".bias")) {
      init_parameter(*p, InitSpec{InitSpec::Kind::Zeros, 0.0}, seed);
    } else if (is_layer_norm(p->name)) {
      init_parameter(*p, InitSpec{InitSpec::Kind::Ones, 0.0}, seed);
    } else {
      init_parameter(*p, InitSpec{InitSpec::Kind::Normal, impl_->config.initializer_range}, seed);
    }
  }
}

AudioEncoder::Output AudioEncoder::forward(const Tensor& input_features, const std::vector<int64_t>& feature_lengths,
                                           bool save) const {
  return impl_->forward(input_features, feature_lengths, save);
}

void AudioEncoder::backward(Saved&& saved, const Tensor& d_out) const { impl_->backward(std::move(saved), d_out); }

}  // namespace veomni
