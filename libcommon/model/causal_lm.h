// Qwen3 / Qwen3-MoE: the text body (embedding, decoder layers) and the causal LM (body + LM head) over packed
// micro-batches, explicit forward and backward.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/batch.h"
#include "model/decoder_layer.h"
#include "model/heads/lm_head.h"
#include "model/kv_cache.h"
#include "model/layer_inputs.h"
#include "model/lora_config.h"
#include "model/model_body.h"
#include "model/model_config.h"
#include "model/param.h"
#include "model/parallel_hooks.h"
#include "model/sft_pass.h"

namespace veomni {

struct ModelOptions {
  Device device = Device::cpu();
  DType compute_dtype = DType::F32;  // parameter/activation dtype for compute (bf16 on GPU mixed precision)
  bool recompute = false;            // activation recomputation per decoder layer (saves only layer inputs)
  // The decoder layers' dense projections (q/k/v/o, gate/up/down) run their forward and input-gradient GEMMs in
  // FP8 (model/layers/linear.h): CUDA with bf16 compute only, which the caller checks.
  bool fp8_linears = false;
  ParallelHooks hooks;               // null members mean single process
  // Multimodal models (Qwen3-VL, the Qwen3-Omni thinker) nest the text model under other names and rotate with
  // M-RoPE; the defaults are the plain Qwen3 model's.
  std::string param_prefix = "model.";          // of embed_tokens, layers.{i} and norm
  std::string lm_head_name = "lm_head.weight";  // when untied
  std::vector<int64_t> mrope_section;           // non-empty: position_ids are [3, S] (interleaved M-RoPE)
  // rank > 0: LoRA adapters on the projections it targets, registered right after their weights
  // (model/layers/lora_adapter.h). Which parameters train is the caller's (TrainModel freezes the base).
  LoraConfig lora_config;
  // false: parameters are registered without values also without hooks (ParamStore::defer_values follows, so that
  // no rank allocates the whole model before FSDP builds its shards).
  bool materialize = true;
};

// What a TextBody's backward needs: the shared layer inputs, each decoder layer's saved activations, the ids to embed
// back into, the router statistics.
struct TextBodySaved final : BodySaved {
  LayerInputs inputs;
  std::vector<DecoderLayer::Saved> layer_saved;  // one per decoder layer, consumed by its backward
  Tensor input_ids;                  // i64 on the device; undefined after forward_embeds (the caller embedded)
  std::vector<double> router_slots;  // global (token, slot) counts per expert over all MoE layers
  double router_rows = 0;            // global routed tokens over all MoE layers
};

// The Qwen3 / Qwen3-MoE body (HF's Qwen3Model up to its last decoder layer): token embedding and decoder layers.
// It registers the groups "embed", "layers.i" and "head", the last holding <prefix>norm.weight for the heads.
class TextBody final : public ModelBody {
 public:
  // Registers the body's parameters under their HF names. Without parameter hooks the values are materialised
  // (zeros) on options.device in options.compute_dtype; expert tensors hold this expert-parallel rank's rows.
  TextBody(const ModelConfig& config, const ModelOptions& options);
  // The same, registering into a store owned by a larger model (its groups follow the store's existing ones, and
  // only the body's own parameters are materialised and initialised here). The store must outlive the body.
  TextBody(const ModelConfig& config, const ModelOptions& options, ParamStore& store);
  ~TextBody() override;

  ParamStore& params() override;
  const ModelConfig& text_config() const override;
  HeadSite head_site() override;
  // HF init: normal(0, initializer_range) for linear, embedding, experts, router; ones for norms. Deterministic for
  // a seed and independent of the parallel layout (each parameter's full tensor is drawn from its own stream).
  // Covers the parameters registered after the body too (its heads'). Then every LoRA adapter of the store (those of media
  // towers that share it included) as PEFT initialises them (model/init.h).
  void init_weights(uint64_t seed) override;
  void set_param_hooks(ParamHooks* hooks) override;
  SequenceHooks* sequence_hooks() const override;

  BodyOutput forward(const MultimodalBatch& batch, bool save) override;
  void backward(std::unique_ptr<BodySaved> saved, Tensor d_hidden, float aux_grad_scale) override;
  // forward() of a text batch.
  BodyOutput forward_text(const Batch& batch, bool save);

  // Seams for bodies that build the input embeddings themselves (media rows written over the token embeddings)
  // and add features between decoder layers (deepstack). Called with the index of a decoder layer and, in forward,
  // that layer's output (which the callback may change in place), in backward the gradient of that output (read
  // only), before the layer's own backward.
  using LayerCallback = std::function<void(size_t layer, Tensor& h)>;
  // Token embeddings [S, hidden] in the compute dtype (runs the embedding group's hooks).
  Tensor embed_tokens(const Tensor& input_ids);
  // The decoder layers over given input embeddings [S, hidden]; batch.input_ids are still validated (they are the
  // targets' vocabulary) but not embedded. after_layer may be empty.
  BodyOutput forward_embeds(const Batch& batch, const Tensor& inputs_embeds, const LayerCallback& after_layer,
                            bool save);
  // Backward of a forward_embeds: returns d(inputs_embeds) [S, hidden] (compute dtype) instead of accumulating the
  // embedding gradient; layer_output_grad may be empty.
  Tensor backward_embeds(std::unique_ptr<BodySaved> saved, Tensor d_hidden, float aux_grad_scale,
                         const LayerCallback& layer_output_grad);
  // Accumulates d_embeds into the embedding table's gradient at input_ids (runs the embedding group's hooks).
  void embed_tokens_backward(const Tensor& input_ids, const Tensor& d_embeds);

  // Inference over a KV cache (model/kv_cache.h), in one process without parallel hooks: the hidden states
  // [S, hidden] (before model.norm) of a cached step's tokens, given their embeddings [S, hidden] (compute dtype)
  // and positions (i64 [S], or [3, S] under M-RoPE, continuing each sequence's earlier positions). Fills step's RoPE
  // tables and writes the step's keys and values into the cache. after_layer, when set, runs on each decoder layer's
  // output (a multimodal prefill adds its deepstack features there, as forward_embeds does).
  Tensor forward_cached(const Tensor& inputs_embeds, const Tensor& position_ids, CachedStep& step, KvCache& cache,
                        const LayerCallback& after_layer = {});
  // Fuses the weights that forward_cached runs as one GEMM (DecoderLayer::fuse_for_decoding); the parameters keep
  // their values and the training path is unchanged. Once, after the weights are loaded.
  void fuse_for_decoding();
  // Whether forward_cached's decode steps (one token a row) of up to `rows` rows read nothing back to the host, so
  // that a recorded graph can hold one (DecoderLayer::decodes_on_device of every layer).
  bool decodes_on_device(int64_t rows) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Qwen3ForCausalLM: the text body with the LM head on token cross-entropy over SFT micro-batches (tests, fixtures
// and tools; the trainer drives the body and heads through its objective). forward returns the pass, saved values
// included, and backward consumes it: the model keeps nothing of a micro-batch.
class CausalLM {
 public:
  // The body's parameters, then lm_head.weight (options.lm_head_name) in the head group, or the embedding listed
  // there when tied (its `group` stays the embed group).
  CausalLM(const ModelConfig& config, const ModelOptions& options);
  ~CausalLM();

  const ModelConfig& config() const { return body_.text_config(); }
  ParamStore& params() { return body_.params(); }
  TextBody& body() { return body_; }
  LmHead& head() { return head_; }
  // Installs (or, with nullptr, removes) the parameter hooks after construction: FSDP is built from the
  // materialised, initialised or loaded parameters and then takes them over.
  void set_param_hooks(ParamHooks* hooks);
  void init_weights(uint64_t seed) { body_.init_weights(seed); }

  // Forward of one micro-batch: the pass holds its ForwardStats and, with save, what its backward needs.
  // logits_out, when non-null, receives the [S, V] f32 logits (tests and fixtures; costs memory).
  SftPass forward(const Batch& batch, bool save, Tensor* logits_out = nullptr);
  // Backward of a pass, consuming it (see SftPass: passes may be consumed in any order). ce_grad_scale multiplies
  // d(ce_sum) (the trainer passes 1/global valid tokens); aux_grad_scale multiplies d(aux_loss)
  // (router_aux_loss_coef / micro-batches in the global batch). Parameter grads accumulate into Parameter::grad.
  void backward(SftPass&& pass, float ce_grad_scale, float aux_grad_scale);

 private:
  TextBody body_;
  LmHead head_;
};

}  // namespace veomni
