// Qwen3-Omni audio encoder: convolution stem, per-chunk sinusoids, windowed encoder layers and the output head.
#include "model/audio/audio_encoder.h"

#include <array>
#include <cstring>
#include <string>

#include "kernels/ops.h"
#include "model/audio/audio_conv_stem.h"
#include "model/audio/audio_encoder_layer.h"
#include "model/init.h"
#include "model/layers/common.h"
#include "model/layers/biased_linear.h"
#include "model/layers/layer_norm.h"

namespace veomni {

namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

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

  // What the last forward kept for backward.
  bool saved = false;
  AudioLayout layout;
  Tensor token_ids;  // layout.token_rows on the device (i64): gathers the tokens from the padded grid
  Tensor proj1_out;
  AudioConvStem::Saved stem_saved;
  std::vector<AudioEncoderLayer::Saved> layer_saved;  // one per layer
  LayerNorm::Saved ln_post_saved;
  BiasedLinear::Saved proj1_saved, proj2_saved;

  Impl(ParamStore& s, const AudioEncoderConfig& c, const AudioEncoderOptions& o);
  Parameter* add(const std::string& name, const Shape& shape);
  ParamGroup& group(size_t offset) { return store.groups()[first_group + offset]; }
  ParamGroup& head_group() { return group(layers.size() + 1); }

  Tensor stem_forward(const Tensor& input_features, bool save);
  Tensor head_forward(const Tensor& h, bool save);
  Tensor forward(const Tensor& input_features, const std::vector<int64_t>& feature_lengths, bool save);
  void backward(const Tensor& d_out);
  void pass_groups_without_work();
  void release();

  void before_forward(ParamGroup& g) { if (options.param_hooks) options.param_hooks->before_forward(g); }
  void after_forward(ParamGroup& g) { if (options.param_hooks) options.param_hooks->after_forward(g); }
  void before_backward(ParamGroup& g) { if (options.param_hooks) options.param_hooks->before_backward(g); }
  void after_backward(ParamGroup& g) { if (options.param_hooks) options.param_hooks->after_backward(g); }
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
  Parameter* proj1_weight = add("proj1.weight", {d, d});
  proj1 = std::make_unique<BiasedLinear>(proj1_weight, add("proj1.bias", {d}));
  Parameter* proj2_weight = add("proj2.weight", {config.output_dim, d});
  proj2 = std::make_unique<BiasedLinear>(proj2_weight, add("proj2.bias", {config.output_dim}));
  // Under FSDP the parameter hooks own the storage (shards and gathered copies).
  if (!options.param_hooks)
    for (Parameter* p : params) p->value = Tensor::zeros(p->local_shape(), options.compute_dtype, options.device);
}

// Chunks -> convolutions -> conv_out, then the tokens picked out of the padded grid plus their sinusoids.
Tensor AudioEncoder::Impl::stem_forward(const Tensor& input_features, bool save) {
  const Tensor host_chunks = audio_padded_chunks(input_features, layout);
  const Tensor chunks = converted(host_chunks.to(options.device), options.compute_dtype);
  ParamGroup& conv = group(0);
  before_forward(conv);
  const Tensor grid = take_out(stem->forward(chunks, save), stem_saved);
  after_forward(conv);
  token_ids = Tensor::from_vector(layout.token_rows, {layout.num_tokens()}).to(options.device);
  Tensor h = empty_like(grid, {layout.num_tokens(), config.d_model});
  ops::embedding_forward(token_ids, grid, h);
  ops::add_(h, converted(token_positions(layout, config.d_model).to(options.device), options.compute_dtype));
  return h;
}

Tensor AudioEncoder::Impl::head_forward(const Tensor& h, bool save) {
  ParamGroup& head = head_group();
  before_forward(head);
  const Tensor p1 = take_out(proj1->forward(take_out(ln_post->forward(h, save), ln_post_saved), save), proj1_saved);
  Tensor act = empty_like(p1, p1.shape());
  ops::gelu_forward(p1, activation, act);
  Tensor out = take_out(proj2->forward(act, save), proj2_saved);
  after_forward(head);
  if (save) proj1_out = p1;
  return out;
}

Tensor AudioEncoder::Impl::forward(const Tensor& input_features, const std::vector<int64_t>& feature_lengths,
                                   bool save) {
  release();
  validate_input(input_features, feature_lengths, config);
  layout = audio_layout(feature_lengths, config);
  if (layout.num_tokens() == 0) {
    pass_groups_without_work();
    saved = save;
    return Tensor::empty({0, config.output_dim}, options.compute_dtype, options.device);
  }
  Tensor h = stem_forward(input_features, save);
  for (size_t i = 0; i < layers.size(); ++i) {
    before_forward(group(i + 1));
    h = take_out(layers[i]->forward(h, layout.cu_seqlens, save), layer_saved.emplace_back());
    after_forward(group(i + 1));
  }
  Tensor out = head_forward(h, save);
  saved = save;
  if (!save) release();
  return out;
}

// No audio on this rank: every group is still gathered and reduced so that collective calls line up.
void AudioEncoder::Impl::pass_groups_without_work() {
  for (size_t i = 0; i < layers.size() + 2; ++i) {
    before_forward(group(i));
    after_forward(group(i));
  }
}

void AudioEncoder::Impl::backward(const Tensor& d_out) {
  VEOMNI_CHECK(saved, "audio encoder backward without a preceding forward that kept its activations (save = true)");
  VEOMNI_INPUT_CHECK(d_out.ndim() == 2 && d_out.dim(0) == layout.num_tokens() && d_out.dim(1) == config.output_dim,
                     "audio encoder output gradient must be [{}, {}], got {}", layout.num_tokens(), config.output_dim,
                     d_out.describe());
  if (layout.num_tokens() == 0) {
    // Zero gradients, reduced like real ones, so that every rank's reduce-scatters line up.
    for (size_t i = layers.size() + 2; i-- > 0;) {
      before_backward(group(i));
      for (Parameter* param : group(i).params) grad_of(*param);
      after_backward(group(i));
    }
    release();
    return;
  }
  VEOMNI_CHECK(layer_saved.size() == layers.size(), "{} saved layers for {} layers", layer_saved.size(),
               layers.size());
  const Tensor dy = converted(d_out.to(options.device), options.compute_dtype);
  ParamGroup& head = head_group();
  before_backward(head);
  const Tensor dact = proj2->backward(std::move(proj2_saved), dy);
  Tensor dp1 = empty_like(dact, dact.shape());
  ops::gelu_backward(dact, proj1_out, activation, dp1);
  proj1_out = Tensor();
  Tensor dh = ln_post->backward(std::move(ln_post_saved), proj1->backward(std::move(proj1_saved), dp1));
  after_backward(head);
  for (size_t i = layers.size(); i-- > 0;) {
    before_backward(group(i + 1));
    dh = layers[i]->backward(std::move(layer_saved[i]), dh, layout.cu_seqlens);
    after_backward(group(i + 1));
  }
  // The gather's adjoint scatters into the padded grid; padding rows get no gradient.
  Tensor dgrid = Tensor::zeros({layout.num_chunks() * layout.padded_tokens, config.d_model}, DType::F32,
                               options.device);
  ops::embedding_backward(token_ids, dh, dgrid);
  ParamGroup& conv = group(0);
  before_backward(conv);
  stem->backward(std::move(stem_saved), converted(dgrid, options.compute_dtype));
  after_backward(conv);
  release();
}

void AudioEncoder::Impl::release() {
  saved = false;
  token_ids = proj1_out = Tensor();
  stem_saved = {};
  layer_saved.clear();
  ln_post_saved = {};
  proj1_saved = proj2_saved = {};
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
    if (!p->value.defined()) continue;
    if (ends_with(p->name, ".bias")) {
      ops::fill_(p->value, 0.0f);
    } else if (is_layer_norm(p->name)) {
      init_parameter(*p, InitSpec{InitSpec::Kind::Ones, 0.0}, seed);
    } else {
      init_parameter(*p, InitSpec{InitSpec::Kind::Normal, impl_->config.initializer_range}, seed);
    }
  }
}

Tensor AudioEncoder::forward(const Tensor& input_features, const std::vector<int64_t>& feature_lengths, bool save) {
  return impl_->forward(input_features, feature_lengths, save);
}

void AudioEncoder::backward(const Tensor& d_out) { impl_->backward(d_out); }

const AudioLayout& AudioEncoder::last_layout() const { return impl_->layout; }

void AudioEncoder::release() { impl_->release(); }

}  // namespace veomni
