// Qwen3 / Qwen3-MoE text body (embedding, decoder layers, with parallel seams) and the causal LM over it.
#include "model/causal_lm.h"

#include <string>
#include <utility>
#include <vector>

#include "kernels/decode_ops.h"
#include "kernels/ops.h"
#include "model/decoder_layer.h"
#include "model/init.h"
#include "model/layer_inputs.h"
#include "model/layers/common.h"
#include "model/layers/lora_adapter.h"

namespace veomni {

namespace {

// The batch's shapes. Its ids are not read here: the collator checked them against the vocabulary when it built the
// batch (naming the dataset file and sample), and the CPU kernels check them again.
void validate_batch(const Batch& b, int64_t sp_size, bool mrope) {
  VEOMNI_INPUT_CHECK(b.input_ids.defined() && b.input_ids.dtype() == DType::I64 && b.input_ids.ndim() == 1 &&
                         b.input_ids.numel() > 0,
                     "batch input_ids must be a non-empty i64 [S] tensor, got {}", b.input_ids.describe());
  const int64_t s = b.input_ids.numel();
  VEOMNI_INPUT_CHECK(b.target_ids.defined() && b.target_ids.dtype() == DType::I64 && b.target_ids.shape() == Shape{s},
                     "batch target_ids must be i64 [{}], got {}", s, b.target_ids.describe());
  if (mrope) {
    VEOMNI_INPUT_CHECK(b.position_ids.defined() && b.position_ids.shape() == (Shape{3, s}),
                       "batch position_ids must be [3, {}] (M-RoPE) for a multimodal model, got {}", s,
                       b.position_ids.describe());
  } else {
    VEOMNI_INPUT_CHECK(b.position_ids.defined() && b.position_ids.ndim() == 1 && b.position_ids.numel() == s,
                       "batch position_ids must be [{}] for a text model (M-RoPE [3, S] positions belong to VL/Omni "
                       "models), got {}",
                       s, b.position_ids.describe());
  }
  VEOMNI_INPUT_CHECK(b.cu_seqlens.size() >= 2 && b.cu_seqlens.front() == 0 && b.cu_seqlens.back() == s * sp_size,
                     "batch cu_seqlens must run from 0 to {} (local length {} x sp size {})", s * sp_size, s, sp_size);
}

}  // namespace

struct TextBody::Impl {
  ModelConfig config;
  ModelOptions options;
  ParamStore owned_store;  // unused when a larger model owns the store
  ParamStore& store;
  size_t first_group = 0;      // the embedding group's index in the store
  size_t first_param = 0;      // index in store.all() of the first parameter this model registered
  Parameter* embed = nullptr;
  Parameter* final_norm = nullptr;
  std::vector<std::unique_ptr<DecoderLayer>> layers;

  Impl(const ModelConfig& c, const ModelOptions& o, ParamStore* external_store);
  ParamGroup& group(size_t index) { return store.groups()[first_group + index]; }
  size_t head_group_index() const { return first_group + layers.size() + 1; }
  bool aux_enabled() const { return config.is_moe() && config.output_router_logits; }

  BodyOutput forward(const Batch& batch, bool save);
  Tensor embed_tokens(const Tensor& ids);
  BodyOutput forward_embeds(const Batch& batch, const Tensor& inputs_embeds, const LayerCallback& after_layer,
                            bool save);
  void backward(std::unique_ptr<BodySaved> saved, Tensor d_hidden, float aux_grad_scale);
  Tensor backward_embeds(TextBodySaved& saved, Tensor d_hidden, float aux_grad_scale,
                         const LayerCallback& layer_output_grad);
  void embed_tokens_backward(const Tensor& ids, const Tensor& d_embeds);
  double aux_loss_from_router_stats(TextBodySaved& saved, const std::vector<RouterStats>& router_stats);
  Tensor aux_prob_gradients(const TextBodySaved& saved, float aux_grad_scale) const;

  void before_forward(ParamGroup& g) { if (options.hooks.params) options.hooks.params->before_forward(g); }
  void after_forward(ParamGroup& g) { if (options.hooks.params) options.hooks.params->after_forward(g); }
  void before_backward(ParamGroup& g) { if (options.hooks.params) options.hooks.params->before_backward(g); }
  void after_backward(ParamGroup& g) { if (options.hooks.params) options.hooks.params->after_backward(g); }
};

TextBody::Impl::Impl(const ModelConfig& c, const ModelOptions& o, ParamStore* external_store)
    : config(c), options(o), store(external_store ? *external_store : owned_store) {
  validate_model_config(config, "model config");
  if (options.lora_config.enabled() && !store.lora()) store.set_lora(std::make_shared<LoraRegistry>(options.lora_config));
  first_group = store.groups().size();
  first_param = store.all().size();
  const std::string& prefix = options.param_prefix;
  store.begin_group("embed");
  embed = store.add(prefix + "embed_tokens.weight", {config.vocab_size, config.hidden_size});
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    store.begin_group("layers." + std::to_string(i));
    layers.push_back(
        std::make_unique<DecoderLayer>(store, config, i, options.hooks.experts, options.recompute, prefix,
                                       options.fp8_linears));
  }
  // The heads register their projections after the final norm, in the same group (see HeadSite).
  store.begin_group("head");
  final_norm = store.add(prefix + "norm.weight", {config.hidden_size});
  // Under FSDP the parameter hooks own the storage (shards and gathered copies).
  if (!options.hooks.params && options.materialize)
    for (size_t i = first_param; i < store.all().size(); ++i)
      store.all()[i]->value = Tensor::zeros(store.all()[i]->local_shape(), options.compute_dtype, options.device);
}

BodyOutput TextBody::Impl::forward(const Batch& batch, bool save) {
  SequenceHooks* sequence = options.hooks.sequence;
  validate_batch(batch, sequence ? sequence->sp_size() : 1, !options.mrope_section.empty());
  Tensor ids = batch.input_ids.to(options.device);
  BodyOutput out = forward_embeds(batch, embed_tokens(ids), {}, save);
  if (save) static_cast<TextBodySaved&>(*out.saved).input_ids = ids;
  return out;
}

Tensor TextBody::Impl::embed_tokens(const Tensor& ids) {
  before_forward(group(0));
  Tensor h = Tensor::empty({ids.numel(), config.hidden_size}, options.compute_dtype, options.device);
  ops::embedding_forward(ids.device() == options.device ? ids : ids.to(options.device), embed->value, h);
  after_forward(group(0));
  return h;
}

BodyOutput TextBody::Impl::forward_embeds(const Batch& batch, const Tensor& inputs_embeds,
                                          const LayerCallback& after_layer, bool save) {
  SequenceHooks* sequence = options.hooks.sequence;
  validate_batch(batch, sequence ? sequence->sp_size() : 1, !options.mrope_section.empty());
  const int64_t s = batch.input_ids.numel();
  VEOMNI_CHECK(inputs_embeds.shape() == (Shape{s, config.hidden_size}) &&
                   inputs_embeds.dtype() == options.compute_dtype,
               "input embeddings {} for {} tokens of hidden size {}", inputs_embeds.describe(), s, config.hidden_size);
  const Device device = options.device;

  auto saved = std::make_unique<TextBodySaved>();
  LayerInputs& inputs = saved->inputs;
  inputs.cu_seqlens = batch.cu_seqlens;
  inputs.real_rows = batch.local_real_tokens();
  inputs.sequence = sequence;
  inputs.experts = options.hooks.experts;
  inputs.cos = Tensor::empty({s, config.head_dim}, DType::F32, device);
  inputs.sin = Tensor::empty({s, config.head_dim}, DType::F32, device);
  ops::rope_tables(batch.position_ids.to(device), config.head_dim, config.rope_theta, options.mrope_section,
                   inputs.cos, inputs.sin);

  Tensor h = inputs_embeds;
  std::vector<RouterStats> router_stats;
  for (size_t i = 0; i < layers.size(); ++i) {
    before_forward(group(i + 1));
    DecoderLayer::Output layer_out = layers[i]->forward(h, inputs, save);
    if (layer_out.router_stats) router_stats.push_back(std::move(*layer_out.router_stats));
    if (save) saved->layer_saved.push_back(std::move(layer_out.saved));
    h = std::move(layer_out.out);
    after_forward(group(i + 1));
    if (after_layer) after_layer(i, h);
  }

  BodyOutput out;
  out.hidden = h;
  out.aux_loss = aux_enabled() ? aux_loss_from_router_stats(*saved, router_stats) : 0.0;
  if (save) out.saved = std::move(saved);
  return out;
}

namespace {

// Every MoE layer's statistics [layers, 2, E] in one read from the device (the forward's only wait for them).
std::vector<float> read_router_stats(const std::vector<RouterStats>& router_stats, int64_t num_experts) {
  if (router_stats.empty()) return {};
  const Device device = router_stats.front().stats.device();
  Tensor all = Tensor::empty({static_cast<int64_t>(router_stats.size()), 2, num_experts}, DType::F32, device);
  for (size_t l = 0; l < router_stats.size(); ++l) {
    Tensor row = all.select(static_cast<int64_t>(l));
    row.copy_from(router_stats[l].stats);
  }
  return all.to(Device::cpu()).to_float_vector();
}

}  // namespace

// aux = E * sum_e (slots_e / R) * (prob_sum_e / R) over all MoE layers' rows R (HF's load_balancing_loss_func on the
// concatenated router logits); under sequence parallelism the sums cover the whole SP group.
double TextBody::Impl::aux_loss_from_router_stats(TextBodySaved& saved, const std::vector<RouterStats>& router_stats) {
  const size_t e_count = static_cast<size_t>(config.num_experts);
  std::vector<double> totals(2 * e_count + 1, 0.0);
  const std::vector<float> stats = read_router_stats(router_stats, config.num_experts);
  for (size_t l = 0; l < router_stats.size(); ++l) {
    const float* layer = stats.data() + l * 2 * e_count;
    for (size_t e = 0; e < e_count; ++e) {
      totals[e] += layer[e];
      totals[e_count + e] += layer[e_count + e];
    }
    totals[2 * e_count] += static_cast<double>(router_stats[l].rows);
  }
  if (options.hooks.sequence) options.hooks.sequence->allreduce_sum(totals);
  saved.router_rows = totals[2 * e_count];
  saved.router_slots.assign(totals.begin(), totals.begin() + static_cast<std::ptrdiff_t>(e_count));
  if (saved.router_rows == 0) return 0.0;
  double aux = 0;
  for (size_t e = 0; e < e_count; ++e)
    aux += (totals[e] / saved.router_rows) * (totals[e_count + e] / saved.router_rows);
  return static_cast<double>(config.num_experts) * aux;
}

// d(aux_grad_scale * aux) / d(prob[row, e]) = scale * E * slots_e / R^2 for every routed row of every MoE layer: one
// [E] vector on the device, which each MoE layer's backward spreads over its real rows (ops::moe_aux_dprobs).
Tensor TextBody::Impl::aux_prob_gradients(const TextBodySaved& saved, float aux_grad_scale) const {
  if (!aux_enabled() || aux_grad_scale == 0.0f || saved.router_rows == 0) return {};
  std::vector<float> grads(saved.router_slots.size());
  const double factor =
      aux_grad_scale * static_cast<double>(config.num_experts) / (saved.router_rows * saved.router_rows);
  for (size_t e = 0; e < grads.size(); ++e) grads[e] = static_cast<float>(factor * saved.router_slots[e]);
  return Tensor::from_vector(grads, {static_cast<int64_t>(grads.size())}).to(options.device);
}

void TextBody::Impl::backward(std::unique_ptr<BodySaved> saved, Tensor d_hidden, float aux_grad_scale) {
  auto* text = dynamic_cast<TextBodySaved*>(saved.get());
  VEOMNI_CHECK(text && text->input_ids.defined(),
               "text body backward without the saved values of its forward (forward with save = true)");
  Tensor ids = text->input_ids;
  Tensor dh = backward_embeds(*text, std::move(d_hidden), aux_grad_scale, {});
  saved.reset();
  embed_tokens_backward(ids, dh);
}

Tensor TextBody::Impl::backward_embeds(TextBodySaved& saved, Tensor d_hidden, float aux_grad_scale,
                                       const LayerCallback& layer_output_grad) {
  VEOMNI_CHECK(saved.layer_saved.size() == layers.size(), "{} saved layers for {} layers", saved.layer_saved.size(),
               layers.size());
  Tensor dh = std::move(d_hidden);
  const Tensor aux_dprob = aux_prob_gradients(saved, aux_grad_scale);
  for (size_t i = layers.size(); i-- > 0;) {
    if (layer_output_grad) layer_output_grad(i, dh);
    before_backward(group(i + 1));
    dh = layers[i]->backward(std::move(saved.layer_saved[i]), dh, saved.inputs, aux_dprob);
    after_backward(group(i + 1));
  }
  saved.layer_saved.clear();
  saved.inputs.cos = saved.inputs.sin = Tensor();
  return dh;
}

void TextBody::Impl::embed_tokens_backward(const Tensor& ids, const Tensor& d_embeds) {
  before_backward(group(0));
  if (embed->trainable) ops::embedding_backward(ids.to(options.device), d_embeds, grad_of(*embed));
  after_backward(group(0));
}

Tensor TextBody::forward_cached(const Tensor& inputs_embeds, const Tensor& position_ids, CachedStep& step,
                                KvCache& cache, const LayerCallback& after_layer) {
  const ModelOptions& options = impl_->options;
  VEOMNI_CHECK(!options.hooks.params && !options.hooks.sequence && !options.hooks.experts,
               "cached inference runs in one process without parallel hooks");
  VEOMNI_CHECK(cache.k.size() == impl_->layers.size(), "a KV cache of {} layers for {} decoder layers",
               cache.k.size(), impl_->layers.size());
  const int64_t s = inputs_embeds.dim(0);
  const int64_t head_dim = impl_->config.head_dim;
  if (!step.write_rows.defined()) step.upload_rows(cache.capacity(), options.device);
  step.cos = Tensor::empty({s, head_dim}, DType::F32, options.device);
  step.sin = Tensor::empty({s, head_dim}, DType::F32, options.device);
  ops::rope_tables(position_ids.device() == options.device ? position_ids : position_ids.to(options.device), head_dim, impl_->config.rope_theta, options.mrope_section,
                   step.cos, step.sin);
  Tensor h = inputs_embeds.clone();  // the layers update it in place; the caller's embeddings stay as they are
  const size_t layers = impl_->layers.size();
  for (size_t i = 0; i < layers;) {
    // A run of dense layers in a step of one token a row is one op (ops::dense_decode_layers), unless the caller
    // looks at h after each layer.
    std::vector<ops::DenseDecodeLayer> run;
    ops::DenseDecodeLayer weights;
    while (!after_layer && step.one_token_each() && i + run.size() < layers &&
           impl_->layers[i + run.size()]->decode_weights(weights))
      run.push_back(std::exchange(weights, ops::DenseDecodeLayer{}));
    if (run.empty()) {
      impl_->layers[i]->forward_cached(h, step, cache.k[i], cache.v[i]);
      if (after_layer) after_layer(i, h);
      ++i;
      continue;
    }
    const auto first = static_cast<std::ptrdiff_t>(i), last = static_cast<std::ptrdiff_t>(i + run.size());
    std::vector<Tensor> k_caches(cache.k.begin() + first, cache.k.begin() + last);
    std::vector<Tensor> v_caches(cache.v.begin() + first, cache.v.begin() + last);
    ops::dense_decode_layers(run, step.cos, step.sin, step.write_rows, step.cache_rows, k_caches, v_caches, h);
    i += run.size();
  }
  return h;
}

bool TextBody::decodes_on_device(int64_t rows) const {
  for (const std::unique_ptr<DecoderLayer>& layer : impl_->layers)
    if (!layer->decodes_on_device(rows)) return false;
  return true;
}

void TextBody::fuse_for_decoding() {
  for (const std::unique_ptr<DecoderLayer>& layer : impl_->layers) layer->fuse_for_decoding();
}

TextBody::TextBody(const ModelConfig& config, const ModelOptions& options)
    : impl_(std::make_unique<Impl>(config, options, nullptr)) {}

TextBody::TextBody(const ModelConfig& config, const ModelOptions& options, ParamStore& store)
    : impl_(std::make_unique<Impl>(config, options, &store)) {}

TextBody::~TextBody() = default;

ParamStore& TextBody::params() { return impl_->store; }

const ModelConfig& TextBody::text_config() const { return impl_->config; }

HeadSite TextBody::head_site() {
  HeadSite site;
  site.store = &impl_->store;
  site.group = impl_->head_group_index();
  site.final_norm = impl_->final_norm;
  site.norm_eps = static_cast<float>(impl_->config.rms_norm_eps);
  site.embed_tokens = impl_->embed;
  site.device = impl_->options.device;
  site.compute_dtype = impl_->options.compute_dtype;
  site.materialize = impl_->options.hooks.params == nullptr && impl_->options.materialize;
  return site;
}

void TextBody::set_param_hooks(ParamHooks* hooks) { impl_->options.hooks.params = hooks; }

SequenceHooks* TextBody::sequence_hooks() const { return impl_->options.hooks.sequence; }

void TextBody::init_weights(uint64_t seed) {
  const auto& all = impl_->store.all();
  for (size_t i = impl_->first_param; i < all.size(); ++i)
    if (all[i]->takes_start_values()) init_parameter(*all[i], hf_init_spec(all[i]->name, impl_->config), seed);
  init_lora_adapters(impl_->store, seed);
}

BodyOutput TextBody::forward(const MultimodalBatch& batch, bool save) { return impl_->forward(batch.text, save); }

BodyOutput TextBody::forward_text(const Batch& batch, bool save) { return impl_->forward(batch, save); }

void TextBody::backward(std::unique_ptr<BodySaved> saved, Tensor d_hidden, float aux_grad_scale) {
  impl_->backward(std::move(saved), std::move(d_hidden), aux_grad_scale);
}

Tensor TextBody::embed_tokens(const Tensor& input_ids) { return impl_->embed_tokens(input_ids); }

BodyOutput TextBody::forward_embeds(const Batch& batch, const Tensor& inputs_embeds, const LayerCallback& after_layer,
                                    bool save) {
  return impl_->forward_embeds(batch, inputs_embeds, after_layer, save);
}

Tensor TextBody::backward_embeds(std::unique_ptr<BodySaved> saved, Tensor d_hidden, float aux_grad_scale,
                                 const LayerCallback& layer_output_grad) {
  auto* text = dynamic_cast<TextBodySaved*>(saved.get());
  VEOMNI_CHECK(text != nullptr, "text body backward without the saved values of its forward (save = true)");
  return impl_->backward_embeds(*text, std::move(d_hidden), aux_grad_scale, layer_output_grad);
}

void TextBody::embed_tokens_backward(const Tensor& input_ids, const Tensor& d_embeds) {
  impl_->embed_tokens_backward(input_ids, d_embeds);
}

CausalLM::CausalLM(const ModelConfig& config, const ModelOptions& options)
    : body_(config, options), head_(body_.head_site(), config, options.lm_head_name) {
  head_.set_param_hooks(options.hooks.params);  // the head group runs under the body's construction-time hooks too
}

CausalLM::~CausalLM() = default;

void CausalLM::set_param_hooks(ParamHooks* hooks) {
  body_.set_param_hooks(hooks);
  head_.set_param_hooks(hooks);
}

SftPass CausalLM::forward(const Batch& batch, bool save, Tensor* logits_out) {
  MultimodalBatch text_only;
  text_only.text = batch;
  return sft_forward(body_, head_, text_only, save, logits_out);
}

void CausalLM::backward(SftPass&& pass, float ce_grad_scale, float aux_grad_scale) {
  sft_backward(body_, head_, std::move(pass), ce_grad_scale, aux_grad_scale);
}

}  // namespace veomni
