// Qwen3 / Qwen3-MoE causal LM: embedding, decoder layers, final norm, LM head and the loss, with parallel seams.
#include "model/causal_lm.h"

#include <string>

#include "kernels/ops.h"
#include "model/decoder_layer.h"
#include "model/init.h"
#include "model/layer_inputs.h"
#include "model/layers/common.h"
#include "model/layers/rmsnorm.h"

namespace veomni {

namespace {

// Token ids outside the vocabulary mean the data was tokenised for another model: report the first one.
void check_token_range(const Tensor& ids, int64_t vocab, bool allow_ignore, const char* what) {
  const Tensor host = ids.is_cpu() ? ids : ids.to(Device::cpu());
  const int64_t* p = host.data<int64_t>();
  for (int64_t i = 0; i < host.numel(); ++i) {
    if (allow_ignore && p[i] == kIgnoreIndex) continue;
    VEOMNI_INPUT_CHECK(p[i] >= 0 && p[i] < vocab, "batch {}[{}] = {} is outside the model vocabulary [0, {})", what, i,
                       p[i], vocab);
  }
}

void validate_batch(const Batch& b, int64_t sp_size, int64_t vocab, bool mrope) {
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
  check_token_range(b.input_ids, vocab, false, "input_ids");
  check_token_range(b.target_ids, vocab, true, "target_ids");
}

int64_t count_valid_targets(const Tensor& targets) {
  const Tensor host = targets.is_cpu() ? targets : targets.to(Device::cpu());
  const int64_t* p = host.data<int64_t>();
  int64_t valid = 0;
  for (int64_t i = 0; i < host.numel(); ++i) valid += p[i] != kIgnoreIndex;
  return valid;
}

}  // namespace

struct CausalLM::Impl {
  ModelConfig config;
  ModelOptions options;
  ParamStore owned_store;  // unused when a larger model owns the store
  ParamStore& store;
  size_t first_group = 0;      // the embedding group's index in the store
  size_t first_param = 0;      // index in store.all() of the first parameter this model registered
  Parameter* embed = nullptr;
  Parameter* lm_head = nullptr;  // the embedding when tied
  std::vector<std::unique_ptr<DecoderLayer>> layers;
  std::unique_ptr<RmsNorm> final_norm;

  // What the last forward kept for backward.
  bool saved = false;
  LayerInputs inputs;
  Tensor input_ids, normed, dlogits;
  RmsNorm::Saved final_norm_saved;
  std::vector<DecoderLayer::Saved> layer_saved;  // one per layer
  std::vector<double> router_slots;  // global (token, slot) counts per expert over all MoE layers
  double router_rows = 0;            // global routed tokens over all MoE layers

  Impl(const ModelConfig& c, const ModelOptions& o, ParamStore* external_store);
  ParamGroup& group(size_t index) { return store.groups()[first_group + index]; }
  ParamGroup& head_group() { return group(layers.size() + 1); }
  bool aux_enabled() const { return config.is_moe() && config.output_router_logits; }

  ForwardStats forward(const Batch& batch, bool only_loss, Tensor* logits_out);
  Tensor embed_tokens(const Tensor& ids);
  ForwardStats forward_embeds(const Batch& batch, const Tensor& inputs_embeds, const LayerCallback& after_layer,
                              bool only_loss, Tensor* logits_out);
  void backward(float ce_grad_scale, float aux_grad_scale);
  Tensor backward_embeds(float ce_grad_scale, float aux_grad_scale, const LayerCallback& layer_output_grad);
  void embed_tokens_backward(const Tensor& ids, const Tensor& d_embeds);
  Tensor head_forward(const Tensor& h, bool save);
  Tensor head_backward(float ce_grad_scale);
  double aux_loss_from_router_stats(const std::vector<RouterStats>& router_stats);
  std::vector<float> aux_prob_gradients(float aux_grad_scale) const;
  void release();

  void before_forward(ParamGroup& g) { if (options.hooks.params) options.hooks.params->before_forward(g); }
  void after_forward(ParamGroup& g) { if (options.hooks.params) options.hooks.params->after_forward(g); }
  void before_backward(ParamGroup& g) { if (options.hooks.params) options.hooks.params->before_backward(g); }
  void after_backward(ParamGroup& g) { if (options.hooks.params) options.hooks.params->after_backward(g); }
};

CausalLM::Impl::Impl(const ModelConfig& c, const ModelOptions& o, ParamStore* external_store)
    : config(c), options(o), store(external_store ? *external_store : owned_store) {
  validate_model_config(config, "model config");
  first_group = store.groups().size();
  first_param = store.all().size();
  const std::string& prefix = options.param_prefix;
  store.begin_group("embed");
  embed = store.add(prefix + "embed_tokens.weight", {config.vocab_size, config.hidden_size});
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    store.begin_group("layers." + std::to_string(i));
    layers.push_back(
        std::make_unique<DecoderLayer>(store, config, i, options.hooks.experts, options.recompute, prefix));
  }
  store.begin_group("head");
  final_norm = std::make_unique<RmsNorm>(store.add(prefix + "norm.weight", {config.hidden_size}), config.rms_norm_eps);
  if (config.tie_word_embeddings) {
    store.add_shared(embed);
    lm_head = embed;
  } else {
    lm_head = store.add(options.lm_head_name, {config.vocab_size, config.hidden_size});
  }
  // Under FSDP the parameter hooks own the storage (shards and gathered copies).
  if (!options.hooks.params)
    for (size_t i = first_param; i < store.all().size(); ++i)
      store.all()[i]->value = Tensor::zeros(store.all()[i]->local_shape(), options.compute_dtype, options.device);
}

// Final norm and logits in the compute dtype (HF's lm_head). The loss reads them as they are: its math is f32 either
// way (HF upcasts the bf16 logits, which is exact), so no f32 copy of the [S, V] logits is made (2.5 GB at seq 4096
// and Qwen3's vocabulary, and two full-size casts a step).
Tensor CausalLM::Impl::head_forward(const Tensor& h, bool save) {
  ParamGroup& head = head_group();
  before_forward(head);
  Tensor n = take_out(final_norm->forward(h, save), final_norm_saved);
  Tensor logits = empty_like(n, {n.dim(0), config.vocab_size});
  ops::matmul(n, false, lm_head->value, true, logits);
  after_forward(head);
  if (save) normed = n;
  return logits;
}

ForwardStats CausalLM::Impl::forward(const Batch& batch, bool only_loss, Tensor* logits_out) {
  SequenceHooks* sequence = options.hooks.sequence;
  validate_batch(batch, sequence ? sequence->sp_size() : 1, config.vocab_size, !options.mrope_section.empty());
  release();
  Tensor ids = batch.input_ids.to(options.device);
  ForwardStats stats = forward_embeds(batch, embed_tokens(ids), {}, only_loss, logits_out);
  if (!only_loss) input_ids = ids;
  return stats;
}

Tensor CausalLM::Impl::embed_tokens(const Tensor& ids) {
  before_forward(group(0));
  Tensor h = Tensor::empty({ids.numel(), config.hidden_size}, options.compute_dtype, options.device);
  ops::embedding_forward(ids.to(options.device), embed->value, h);
  after_forward(group(0));
  return h;
}

ForwardStats CausalLM::Impl::forward_embeds(const Batch& batch, const Tensor& inputs_embeds,
                                            const LayerCallback& after_layer, bool only_loss, Tensor* logits_out) {
  SequenceHooks* sequence = options.hooks.sequence;
  validate_batch(batch, sequence ? sequence->sp_size() : 1, config.vocab_size, !options.mrope_section.empty());
  const int64_t s = batch.input_ids.numel();
  VEOMNI_CHECK(inputs_embeds.shape() == (Shape{s, config.hidden_size}) &&
                   inputs_embeds.dtype() == options.compute_dtype,
               "input embeddings {} for {} tokens of hidden size {}", inputs_embeds.describe(), s, config.hidden_size);
  release();
  const bool save = !only_loss;
  const Device device = options.device;

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
    layer_saved.push_back(std::move(layer_out.saved));
    h = std::move(layer_out.out);
    after_forward(group(i + 1));
    if (after_layer) after_layer(i, h);
  }

  Tensor logits = head_forward(h, save);
  h = Tensor();
  // A copy either way: the gradient is written over `logits` below.
  if (logits_out) *logits_out = logits.dtype() == DType::F32 ? logits.clone() : converted(logits, DType::F32);
  Tensor losses = Tensor::empty({s}, DType::F32, device);
  // The gradient is produced in place of the logits (in their dtype, rounded to nearest even as a cast of the f32
  // gradient would be) with scale 1; backward applies ce_grad_scale in its GEMMs.
  Tensor dlogits_out = save ? logits : Tensor();
  ops::cross_entropy(logits, batch.target_ids.to(device), kIgnoreIndex, 1.0f, losses, dlogits_out);

  ForwardStats stats;
  stats.ce_sum = ops::sum(losses);
  stats.valid_tokens = count_valid_targets(batch.target_ids);
  stats.aux_loss = aux_enabled() ? aux_loss_from_router_stats(router_stats) : 0.0;
  if (save) {
    dlogits = dlogits_out;
    saved = true;
  } else {
    release();
  }
  return stats;
}

// aux = E * sum_e (slots_e / R) * (prob_sum_e / R) over all MoE layers' rows R (HF's load_balancing_loss_func on the
// concatenated router logits); under sequence parallelism the sums cover the whole SP group.
double CausalLM::Impl::aux_loss_from_router_stats(const std::vector<RouterStats>& router_stats) {
  const size_t e_count = static_cast<size_t>(config.num_experts);
  std::vector<double> totals(2 * e_count + 1, 0.0);
  for (const RouterStats& stats : router_stats) {
    for (size_t e = 0; e < e_count; ++e) {
      totals[e] += stats.expert_slots[e];
      totals[e_count + e] += stats.prob_sums[e];
    }
    totals[2 * e_count] += static_cast<double>(stats.rows);
  }
  if (options.hooks.sequence) options.hooks.sequence->allreduce_sum(totals);
  router_rows = totals[2 * e_count];
  router_slots.assign(totals.begin(), totals.begin() + static_cast<std::ptrdiff_t>(e_count));
  if (router_rows == 0) return 0.0;
  double aux = 0;
  for (size_t e = 0; e < e_count; ++e) aux += (totals[e] / router_rows) * (totals[e_count + e] / router_rows);
  return static_cast<double>(config.num_experts) * aux;
}

// d(aux_grad_scale * aux) / d(prob[row, e]) = scale * E * slots_e / R^2 for every routed row of every MoE layer.
std::vector<float> CausalLM::Impl::aux_prob_gradients(float aux_grad_scale) const {
  if (!aux_enabled() || aux_grad_scale == 0.0f || router_rows == 0) return {};
  std::vector<float> grads(router_slots.size());
  const double factor = aux_grad_scale * static_cast<double>(config.num_experts) / (router_rows * router_rows);
  for (size_t e = 0; e < grads.size(); ++e) grads[e] = static_cast<float>(factor * router_slots[e]);
  return grads;
}

Tensor CausalLM::Impl::head_backward(float ce_grad_scale) {
  ParamGroup& head = head_group();
  before_backward(head);
  Tensor dlogits_c = converted(dlogits, options.compute_dtype);
  dlogits = Tensor();
  Tensor dnormed = empty_like(normed, normed.shape());
  ops::matmul(dlogits_c, false, lm_head->value, false, dnormed, ce_grad_scale);
  ops::matmul(dlogits_c, true, normed, false, grad_of(*lm_head), ce_grad_scale, 1.0f);
  dlogits_c = normed = Tensor();
  Tensor dh = final_norm->backward(std::move(final_norm_saved), dnormed);
  after_backward(head);
  return dh;
}

void CausalLM::Impl::backward(float ce_grad_scale, float aux_grad_scale) {
  VEOMNI_CHECK(saved && input_ids.defined(),
               "backward without a preceding forward that kept its activations (only_loss = false)");
  Tensor ids = input_ids;
  Tensor dh = backward_embeds(ce_grad_scale, aux_grad_scale, {});
  embed_tokens_backward(ids, dh);
}

Tensor CausalLM::Impl::backward_embeds(float ce_grad_scale, float aux_grad_scale,
                                       const LayerCallback& layer_output_grad) {
  VEOMNI_CHECK(saved, "backward without a preceding forward that kept its activations (only_loss = false)");
  VEOMNI_CHECK(layer_saved.size() == layers.size(), "{} saved layers for {} layers", layer_saved.size(),
               layers.size());
  Tensor dh = head_backward(ce_grad_scale);
  const std::vector<float> aux_dprobs = aux_prob_gradients(aux_grad_scale);
  for (size_t i = layers.size(); i-- > 0;) {
    if (layer_output_grad) layer_output_grad(i, dh);
    before_backward(group(i + 1));
    dh = layers[i]->backward(std::move(layer_saved[i]), dh, inputs, aux_dprobs);
    after_backward(group(i + 1));
  }
  release();
  return dh;
}

void CausalLM::Impl::embed_tokens_backward(const Tensor& ids, const Tensor& d_embeds) {
  before_backward(group(0));
  ops::embedding_backward(ids.to(options.device), d_embeds, grad_of(*embed));
  after_backward(group(0));
}

void CausalLM::Impl::release() {
  saved = false;
  input_ids = normed = dlogits = Tensor();
  inputs.cos = inputs.sin = Tensor();
  final_norm_saved = {};
  layer_saved.clear();
}

CausalLM::CausalLM(const ModelConfig& config, const ModelOptions& options)
    : impl_(std::make_unique<Impl>(config, options, nullptr)) {}

CausalLM::CausalLM(const ModelConfig& config, const ModelOptions& options, ParamStore& store)
    : impl_(std::make_unique<Impl>(config, options, &store)) {}

CausalLM::~CausalLM() = default;

const ModelConfig& CausalLM::config() const { return impl_->config; }

ParamStore& CausalLM::params() { return impl_->store; }

void CausalLM::set_param_hooks(ParamHooks* hooks) { impl_->options.hooks.params = hooks; }

void CausalLM::init_weights(uint64_t seed) {
  const auto& all = impl_->store.all();
  for (size_t i = impl_->first_param; i < all.size(); ++i)
    if (all[i]->value.defined()) init_parameter(*all[i], hf_init_spec(all[i]->name, impl_->config), seed);
}

ForwardStats CausalLM::forward(const Batch& batch, bool only_loss, Tensor* logits_out) {
  return impl_->forward(batch, only_loss, logits_out);
}

void CausalLM::backward(float ce_grad_scale, float aux_grad_scale) { impl_->backward(ce_grad_scale, aux_grad_scale); }

Tensor CausalLM::embed_tokens(const Tensor& input_ids) { return impl_->embed_tokens(input_ids); }

ForwardStats CausalLM::forward_embeds(const Batch& batch, const Tensor& inputs_embeds, const LayerCallback& after_layer,
                                      bool only_loss, Tensor* logits_out) {
  return impl_->forward_embeds(batch, inputs_embeds, after_layer, only_loss, logits_out);
}

Tensor CausalLM::backward_embeds(float ce_grad_scale, float aux_grad_scale, const LayerCallback& layer_output_grad) {
  return impl_->backward_embeds(ce_grad_scale, aux_grad_scale, layer_output_grad);
}

void CausalLM::embed_tokens_backward(const Tensor& input_ids, const Tensor& d_embeds) {
  impl_->embed_tokens_backward(input_ids, d_embeds);
}

}  // namespace veomni
